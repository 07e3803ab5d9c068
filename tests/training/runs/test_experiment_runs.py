"""engine.training.runs.experiment_runs: an experiment's arms listed as ordinary runs, named so a person knows them,
by a bounded walk that never leaves the runs folder and never raises."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from engine.training.runs import experiment_runs as walk
from engine.training.runs.experiment_runs import ExperimentRunName, experiment_runs, locate
from engine.training.runs.run_catalog import checkpoints_newest_first, find_run, run_names, run_summaries
from engine.training.runs.run_folder import RunFolder

SCALE = "tiny-600-steps-1a2b3c4d"


def fake_run(folder: Path, step: int = 10) -> RunFolder:
    """A run folder with one complete checkpoint and a run.json."""
    run = RunFolder(folder)
    checkpoint = run.checkpoint_dir(step)
    checkpoint.mkdir(parents=True)
    for name in ("config.json", "training_state.pt"):
        (checkpoint / name).write_text("x")
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(checkpoint / "model.safetensors"))   # headers that check out
    (checkpoint / "explorer_state.json").write_text(json.dumps({"step": step, "epoch": 0, "metrics": {"loss": 2.5},
                                                                "config": {"total_steps": 600}}))
    run.spec_path.write_text(json.dumps({"task": "pretraining", "corpus": "shakespeare"}))
    return run


def arm_run(runs: Path, experiment: str, arm: str, seed: int, run: str = "pretrain", scale: str = SCALE) -> Path:
    return runs / "experiments" / experiment / scale / arm / f"seed-{seed}" / run


def deny_listing(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """``os.scandir`` of ``path`` raises PermissionError (the tests run as root, whom ``chmod 000`` does not stop)."""
    real, denied = os.scandir, os.path.abspath(path)

    def scandir(target=".", _real=real):
        if isinstance(target, (str, os.PathLike)) and os.path.abspath(os.fspath(target)) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(target))
        return _real(target)

    monkeypatch.setattr(os, "scandir", scandir)


def test_arms_are_listed_named_and_titled_beside_the_direct_runs(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs / "my-run")
    fake_run(arm_run(runs, "bert-table8", "mix-100-0-0", 1))
    fake_run(arm_run(runs, "bert-table8", "mix-100-0-0", 1, run="pos_acc"))
    fake_run(arm_run(runs, "bert-table8", "mix-80-10-10", 0))
    (runs / "experiments" / "bert-table8" / SCALE / "tokenizer").mkdir()       # the shared vocabulary: no run
    (arm_run(runs, "bert-table8", "mix-80-10-10", 0).parent / "results.json").write_text("{}")
    arm_run(runs, "bert-table8", "mix-80-10-10", 1).mkdir(parents=True)        # started, no checkpoint yet

    found = {run.name: run.title for run in experiment_runs(runs)}
    name = f"experiments:bert-table8:{SCALE}:mix-100-0-0:seed-1:pretrain"
    assert found == {
        name: "bert-table8 · mix-100-0-0 · seed 1 · tiny 600 steps",
        f"experiments:bert-table8:{SCALE}:mix-100-0-0:seed-1:pos_acc":
            "bert-table8 · mix-100-0-0 · seed 1 · pos_acc fine-tune · tiny 600 steps",
        f"experiments:bert-table8:{SCALE}:mix-80-10-10:seed-0:pretrain": "bert-table8 · mix-80-10-10 · seed 0 · tiny 600 steps",
    }
    # The direct runs stay as they were unless experiments are asked for, and come first when they are.
    assert run_names(runs) == ("my-run",)
    assert run_names(runs, experiments=True)[0] == "my-run" and set(run_names(runs, experiments=True)) == {"my-run",
                                                                                                        *found}
    summaries = {s.name: s for s in run_summaries(runs, experiments=True)}
    assert summaries[name].label.startswith("bert-table8 · mix-100-0-0 · seed 1 · tiny 600 steps · step 10 / 600")
    assert summaries["my-run"].label.startswith("my-run · step 10")
    # The picker's checkpoints keep their run's name and title, and the name finds the run again.
    infos = checkpoints_newest_first(runs, experiments=True)
    assert len(infos) == 4 and {c.run.name for c in infos} == {"my-run", *found}
    assert len(checkpoints_newest_first(runs)) == 1
    assert find_run(runs, name, experiments=True).path == arm_run(runs, "bert-table8", "mix-100-0-0", 1)
    assert locate(runs, name).title == found[name] and locate(runs, "my-run").root == runs / "my-run"


def test_a_name_is_refused_unless_it_names_a_place_of_the_layout(tmp_path):
    runs = tmp_path / "runs"
    fake_run(arm_run(runs, "e", "a", 0))
    for bad in ("experiments:e:..:a:seed-0:pretrain", "experiments:e:s:a:zero:pretrain", "experiments:",
                "experiments:e:s:a:seed-0:pretrain:more", "experiments:e:.hidden", "../x", "a/b"):
        assert ExperimentRunName.parse(bad) is None
        with pytest.raises(FileNotFoundError):
            find_run(runs, bad, experiments=True)
    name = f"experiments:e:{SCALE}:a:seed-0:pretrain"
    with pytest.raises(FileNotFoundError, match="is gone"):       # Continue (experiments off) never reaches an arm
        find_run(runs, name)


def test_a_damaged_arm_is_listed_damaged_and_an_unreadable_folder_as_damaged(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    damaged = fake_run(arm_run(runs, "e", "a", 0))
    damaged.spec_path.write_text("{not json")
    fake_run(arm_run(runs, "e", "b", 0))
    locked = arm_run(runs, "e", "c", 0).parent
    locked.mkdir(parents=True)
    deny_listing(monkeypatch, locked)
    summaries = {s.name: s for s in run_summaries(runs, experiments=True)}
    bad = summaries[f"experiments:e:{SCALE}:a:seed-0:pretrain"]
    assert bad.problems and "⚠ damaged" in bad.label and bad.label.startswith("e · a · seed 0")
    unreadable = summaries[f"experiments:e:{SCALE}:c:seed-0"]
    assert "cannot read its folder" in unreadable.label and unreadable.label.startswith("e · c · seed 0")
    assert f"experiments:e:{SCALE}:c:seed-0" not in {r.name for r in experiment_runs(runs)}   # only when asked
    with pytest.raises(FileNotFoundError, match="cannot be used"):
        find_run(runs, f"experiments:e:{SCALE}:c:seed-0", experiments=True)


def test_links_never_leave_the_runs_folder(tmp_path):
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    fake_run(elsewhere / "seed-0" / "pretrain")
    arm = runs / "experiments" / "e" / SCALE / "away"
    arm.parent.mkdir(parents=True)
    arm.symlink_to(elsewhere)                                      # an arm folder that is a link out
    (runs / "experiments" / "loop").symlink_to("loop")
    fake_run(arm_run(runs, "e", "inside", 0))
    (runs / "experiments" / "e" / SCALE / "alias").symlink_to("inside")   # a link that stays inside is followed
    assert sorted(run.title for run in experiment_runs(runs)) == ["e · alias · seed 0 · tiny 600 steps",
                                                                  "e · inside · seed 0 · tiny 600 steps"]
    assert locate(runs, f"experiments:e:{SCALE}:away:seed-0:pretrain") is None


def test_the_walk_is_capped(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    for k in range(5):
        fake_run(arm_run(runs, f"exp-{k}", "a", 0))
        os.utime(runs / "experiments" / f"exp-{k}", (1000 + k, 1000 + k))
    monkeypatch.setattr(walk, "MAX_EXPERIMENTS", 2)
    assert [r.title.split(" · ")[0] for r in experiment_runs(runs)] == ["exp-4", "exp-3"]   # the newest first
    monkeypatch.setattr(walk, "MAX_EXPERIMENTS", 24)
    monkeypatch.setattr(walk, "MAX_RUNS", 3)
    assert len(experiment_runs(runs)) == 3
    monkeypatch.setattr(walk, "MAX_RUNS", 240)
    for k in range(4):
        fake_run(arm_run(runs, "wide", f"arm-{k}", 0))
    monkeypatch.setattr(walk, "MAX_ENTRIES", 2)
    assert sorted(r.title.split(" · ")[1] for r in experiment_runs(runs) if r.title.startswith("wide")) == [
        "arm-0", "arm-1"]


def test_listing_fifty_experiments_stays_cheap(tmp_path):
    """50 experiment folders of 6 arms × 2 seeds × (pretrain + 2 fine-tunes): the walk stops at its caps."""
    runs = tmp_path / "runs"
    for k in range(50):
        for arm in range(6):
            for seed in range(2):
                for run in ("pretrain", "pos_acc", "sentiment_acc"):
                    (arm_run(runs, f"exp-{k:02d}", f"arm-{arm}", seed, run) / "checkpoints").mkdir(parents=True)
    found = experiment_runs(runs)
    assert len(found) == walk.MAX_RUNS                 # 1,800 runs on disk; the cap holds
    assert len({run.title.split(" · ")[0] for run in found}) <= walk.MAX_EXPERIMENTS
