"""The training stage's rule for the best model (scripts/gpu/training.py): better means a higher masked-token
top-1 while SQuAD F1 stays within the tolerance of the start model's; early stopping after ``patience`` scores."""
from __future__ import annotations

import time

from scripts.gpu import heldout
from scripts.gpu.training import KeepBest, Recipe


def keeper(tmp_path, **recipe) -> KeepBest:
    sample = heldout.Sample([], [])
    return KeepBest(Recipe(**recipe), sample, time.monotonic() + 60, tmp_path / "metrics.jsonl", log=lambda m: None)


def test_better_needs_top1_up_and_f1_within_tolerance(tmp_path):
    k = keeper(tmp_path, qa_tolerance=1.0)
    k.start = k.best = {"step": 0, "top1": 0.30, "f1": 70.0}
    assert k.better({"top1": 0.31, "f1": 69.5})
    assert not k.better({"top1": 0.31, "f1": 68.9})        # QA lost more than a point
    assert not k.better({"top1": 0.30, "f1": 75.0})        # top-1 did not rise
    k.best = {"step": 100, "top1": 0.33, "f1": 69.2}
    assert not k.better({"top1": 0.32, "f1": 71.0})        # below the best so far


def test_without_a_qa_head_only_top1_counts(tmp_path):
    k = keeper(tmp_path)
    k.start = k.best = {"step": 0, "top1": 0.30}
    assert k.better({"top1": 0.301})


def test_patience_stops_the_run(tmp_path):
    k = keeper(tmp_path, patience=2)
    k.since_best = 1
    assert not k.should_stop(trainer=None)
    k.since_best = 2
    assert k.should_stop(trainer=None) and "no better held-out score in 2" in k.stop_reason
