"""Several arms at once (``engine.experiments.sharding``): which work units a torchrun rank takes (the arms of one
pretraining run together, in the experiment's order), how many threads it uses, and ``torchrun --nproc-per-node 2
-m engine.experiment`` printing exactly the table and JSON of one process, with each arm-seed run by one rank only."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.experiments import sharding
from engine.experiments.builtin import experiment
from engine.experiments.builtin_table7 import BERT_TABLE7
from engine.experiments.runner import experiment_dir, seed_dir
from engine.experiments.sharding import share, threads_per_rank, work_units
from engine.training.runs.state import read_metrics
from support.app_helpers import free_port
from support.tiny_experiment import TINY, TINY_SCALE

ROOT = Path(__file__).resolve().parents[2]


def names(units: list) -> list[tuple[int, list[str]]]:
    return [(seed, [arm.name for arm in arms]) for seed, arms in units]


def test_a_unit_is_one_seed_and_one_pretraining_run_in_the_experiments_order() -> None:
    table5 = experiment("bert-table5")
    units = work_units(table5, table5.scale(True, seeds=2), arms=["ltr", "mlm"])
    assert names(units) == [(0, ["mlm"]), (0, ["ltr"]), (1, ["mlm"]), (1, ["ltr"])]
    every = [arm.name for arm in BERT_TABLE7.arms]                  # one pretraining run: one unit per seed
    assert names(work_units(BERT_TABLE7, BERT_TABLE7.scale(True, seeds=2))) == [(0, every), (1, every)]
    assert names(work_units(BERT_TABLE7, BERT_TABLE7.scale(True, seeds=1), arms=["embeddings"])) == \
        [(0, ["embeddings"])]                                       # its owner not chosen: still its own unit
    assert share(units, 0, 2) == [units[0], units[2]] and share(units, 1, 2) == [units[1], units[3]]
    assert share(units, 2, 3) == [units[2]] and share(units, 4, 5) == []     # more ranks than units: some idle


def test_each_rank_takes_its_share_of_the_machines_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharding.os, "cpu_count", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert threads_per_rank() == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "32")
    assert threads_per_rank() == 1
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert threads_per_rank() == 16


def run(command: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]), "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_torchrun_two_processes_print_one_process_table_with_each_arm_run_once(tmp_path: Path) -> None:
    experiment_args = ["-m", "support.tiny_experiment_cli", TINY.name, "--quick", "--threads", "1"]
    shared_root, single_root = tmp_path / "torchrun", tmp_path / "single"
    shared = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                  f"--master_port={free_port()}", *experiment_args, "--root", str(shared_root),
                  "--json", str(tmp_path / "torchrun.json")])
    assert shared.returncode == 0, shared.stderr[-3000:]
    assert "[rank 0] training a WordPiece vocabulary" in shared.stderr        # rank 1 waited for it
    pretrained = sorted(line for line in shared.stderr.splitlines() if "· seed 0: pretraining" in line)
    assert pretrained == ["[rank 0] tiny-mix · mix-80-10-10 · seed 0: pretraining 12 steps",
                          "[rank 1] tiny-mix · mix-100-0-0 · seed 0: pretraining 12 steps"]
    for arm in TINY.arms:                                            # each arm-seed's run written once, whole
        run_dir = seed_dir(shared_root, TINY, arm, 0, TINY_SCALE) / "pretrain"
        steps = [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
        assert steps == list(range(1, 13)), arm.name

    # one process on the same vocabulary (WordPiece training breaks ties in no fixed order): the same numbers
    shutil.copytree(experiment_dir(shared_root, TINY, TINY_SCALE) / "tokenizer",
                    experiment_dir(single_root, TINY, TINY_SCALE) / "tokenizer")
    single = run([sys.executable, *experiment_args, "--root", str(single_root), "--json", str(tmp_path / "one.json")])
    assert single.returncode == 0, single.stderr[-3000:]
    assert "| 80/10/10 (BERT's) | 84.2 |" in shared.stdout and shared.stdout == single.stdout
    assert json.loads((tmp_path / "torchrun.json").read_text(encoding="utf-8")) == \
        json.loads((tmp_path / "one.json").read_text(encoding="utf-8"))
