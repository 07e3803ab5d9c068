"""An experiment end to end on a tiny scale: each arm an ordinary run with its numbers kept; run again, nothing is
redone; killed with SIGKILL in the middle of an arm's pretraining, it continues to exactly the numbers of an
uninterrupted run; the command line refuses bad arguments in a sentence."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.checkpoints.hf_format import load
from engine.experiments.builtin import experiment
from engine.experiments.evaluation import DOWNSTREAM, HELD_OUT, final_model
from engine.experiments.features import frozen_feature_accuracy
from engine.experiments.runner import experiment_dir, run_experiment, scale_key, seed_dir
from engine.training.runs.run_folder import RunFolder

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--quick", "--steps", "40", "--seeds", "1", "--max-documents", "30", "--eval-documents", "5",
        "--downstream-steps", "6"]
TABLE8 = experiment("bert-table8")
TINY_SCALE = TABLE8.scale(True, steps=40, seeds=1, max_documents=30, eval_documents=5, downstream_steps=6)  # TINY


def command(root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "engine.experiment", "bert-table8", *TINY, "--arms", "mix-80-10-10",
            "--root", str(root), "--threads", "1", *extra]


def numbers(root: Path) -> dict:
    kept = seed_dir(root, TABLE8, TABLE8.arm("mix-80-10-10"), 0, TINY_SCALE) / "results.json"
    return json.loads(kept.read_text(encoding="utf-8"))


def test_cli_an_experiment_runs_every_arm_as_a_run_and_prints_the_papers_table(tmp_path: Path) -> None:
    table5 = experiment("bert-table5")
    scale = table5.scale(True, steps=12, seeds=1, max_documents=30, eval_documents=5, downstream_steps=4)
    said: list[str] = []
    found = run_experiment(tmp_path, table5, scale, said.append, arms=["mlm", "ltr"])
    assert [r.arm for r in found] == ["mlm", "ltr"]
    mlm, ltr = found
    assert 0.0 <= mlm.metrics["masked_acc"] <= 1.0 and ltr.metrics["masked_acc"] is None   # not defined for LTR
    assert all(0.0 <= r.metrics[m] <= 1.0 for r in found for m in ("pos_acc", "sentiment_acc"))
    run = RunFolder(seed_dir(tmp_path, table5, table5.arm("ltr"), 0, scale) / "pretrain")
    spec = json.loads(run.spec_path.read_text(encoding="utf-8"))
    assert spec["task_settings"]["objective"] == "clm" and run.latest().step == 12      # an ordinary, whole run
    kept = seed_dir(tmp_path, table5, table5.arm("mlm"), 0, scale) / "results.json"
    before = kept.stat().st_mtime_ns
    again = run_experiment(tmp_path, table5, scale, said.append, arms=["mlm", "ltr"])       # read, not redone
    assert again == found and kept.stat().st_mtime_ns == before
    kept.write_text('{"arm": "mlm", "metrics": [1, 2]', encoding="utf-8")                   # damaged on disk
    mended = run_experiment(tmp_path, table5, scale, said.append, arms=["mlm"])               # measured again
    assert mended == found[:1] and any("results.json cannot be read" in line for line in said)


def test_another_scale_is_another_folder() -> None:
    table5 = experiment("bert-table5")
    quick, full = table5.scale(True), table5.scale(False)
    assert scale_key(quick) != scale_key(full) and scale_key(quick).startswith("tiny-600-steps-")
    assert scale_key(quick) == scale_key(table5.scale(True, seeds=5))        # more seeds add to the same runs
    bilstm = table5.scale(True, feature_classifier="bilstm")                  # what reads frozen features
    assert scale_key(bilstm) != scale_key(quick) and scale_key(quick).endswith("-6b7b3d92")   # as before it


def test_a_sigkilled_experiment_continues_to_the_same_numbers(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    whole = subprocess.run(command(tmp_path / "whole"), cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert "| 80% [MASK] · 10% kept · 10% random (BERT's) | 84.2 | 95.4 | 94.9 |" in whole.stdout

    killed_root = tmp_path / "killed"     # the same vocabulary (WordPiece training breaks ties in no fixed order)
    shutil.copytree(experiment_dir(tmp_path / "whole", TABLE8, TINY_SCALE) / "tokenizer",
                    experiment_dir(killed_root, TABLE8, TINY_SCALE) / "tokenizer")
    run = seed_dir(killed_root, TABLE8, TABLE8.arm("mix-80-10-10"), 0, TINY_SCALE) / "pretrain"
    process = subprocess.Popen(command(killed_root), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (RunFolder(run).latest() if run.is_dir() else None):     # its first checkpoint: kill it there
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    stopped_at = RunFolder(run).latest().step
    assert stopped_at < 40 and not (run.parent / "results.json").exists()

    resumed = subprocess.run(command(killed_root), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"continuing {run} from step {stopped_at}" in resumed.stderr
    assert numbers(killed_root)["metrics"] == numbers(tmp_path / "whole")["metrics"]
    final = load(final_model(run))              # Table 8's feature-based column: the classifier on its frozen layers
    assert numbers(killed_root)["metrics"]["pos_features_acc"] == frozen_feature_accuracy(
        final, "concat-up-to-4", DOWNSTREAM["pos_acc"][1], HELD_OUT, 0)


@pytest.mark.parametrize("extra, words", [(["--arms", "mix-1-2-3"], "has no arm mix-1-2-3; its arms: mix-80"),
                                          (["--steps", "0"], "--steps must be at least 1"),
                                          (["--downstream-steps", "0"], "--downstream-steps must be at least 1"),
                                          (["--feature-classifier", "crf"], "invalid choice: 'crf'")])
def test_cli_refuses_bad_arguments_in_a_sentence(tmp_path: Path, extra: list[str], words: str) -> None:
    done = subprocess.run([sys.executable, "-m", "engine.experiment", "bert-table8", *extra, "--root",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and words in done.stderr and not (tmp_path / "bert-table8").exists()
    unknown = subprocess.run([sys.executable, "-m", "engine.experiment", "bert-table99"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2
    assert "no experiment 'bert-table99'; there are bert-table8, bert-table5, bert-table6" in unknown.stderr
