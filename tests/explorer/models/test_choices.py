"""A checkpoint's entry in the model picker says which loss it shows: the held-out loss of its step's evaluation
(comparable between checkpoints) where there is one, else the last logged step's one batch, named as such."""
from __future__ import annotations

from pathlib import Path

from engine.training.runs.run_folder import CheckpointInfo
from explorer.models.choices import checkpoint_label


def info(tmp_path: Path, step: int, **fields) -> CheckpointInfo:
    return CheckpointInfo(tmp_path / "run-a" / "checkpoints" / f"step-{step:06d}", step, **fields)


def test_held_out_loss_where_there_is_one_else_the_batch_said_so(tmp_path):
    lucky = info(tmp_path, 75, metrics={"mlm_loss": 2.5})                      # one easy batch
    later = info(tmp_path, 258, metrics={"mlm_loss": 3.1}, eval_metrics={"step": 258, "eval_mlm_loss": 2.9})
    assert checkpoint_label(lucky) == "run-a · step 75 · batch loss 2.500"
    assert checkpoint_label(later) == "run-a · step 258 · held-out loss 2.900"
    tuned = info(tmp_path, 30, metrics={"loss": 0.4}, eval_metrics={"eval_loss": 0.5, "eval_accuracy": 0.8})
    assert checkpoint_label(tuned) == "run-a · step 30 · held-out loss 0.500"
    assert checkpoint_label(info(tmp_path, 3, metrics={"mlm_loss": float("nan")})) == "run-a · step 3"
    assert checkpoint_label(info(tmp_path, 3, damage="explorer_state.json: bad")).endswith(
        "⚠ explorer_state.json: bad (the weights may still load)")
