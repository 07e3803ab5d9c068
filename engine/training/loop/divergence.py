"""A training step whose loss or gradient norm is not finite (NaN or inf): found before its update is applied, and
the error that ends the run, naming the last good checkpoint.

``Trainer.step`` checks the values of its one host sync (``divergence``); when one is not finite no update is
applied and it raises ``TrainingDiverged``. The checkpoints already written stay as they are; the loop logs a
``diverged`` record to ``metrics.jsonl``, the command lines exit 1 and the app's worker ends the run as diverged.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence


class TrainingDiverged(RuntimeError):
    """The loss or gradient norm became NaN/inf; no update was applied."""

    def __init__(self, message: str, step: int, last_checkpoint: Path | None) -> None:
        super().__init__(message)
        self.step, self.last_checkpoint = step, last_checkpoint


def is_finite(value: float) -> bool:
    """Neither NaN nor an infinity."""
    return value == value and value not in (float("inf"), float("-inf"))


def divergence(values: Sequence[float], loss: float, grad_norm: float, step: int,
               last_checkpoint: Path | None) -> TrainingDiverged | None:
    """The error of step ``step`` when any of its ``values`` (the task's sums, ``loss``, ``grad_norm``) is not finite,
    naming the loss when it is the one, else the gradient norm; None when all are finite."""
    if all(map(is_finite, values)):
        return None
    what, value = ("loss", loss) if not is_finite(loss) else ("gradient norm", grad_norm)
    where = (f"the last good checkpoint is {last_checkpoint.name}" if last_checkpoint is not None
             else "no checkpoint was saved before it")
    return TrainingDiverged(f"{what} became {value} at step {step}; the update was not applied and the run "
                            f"stopped; {where}. Try a lower learning rate or more warmup.", step, last_checkpoint)
