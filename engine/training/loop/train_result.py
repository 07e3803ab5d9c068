"""How one ``Trainer.train`` call ended: a ``TrainStatus`` and the step and metrics it ended on."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class TrainStatus(StrEnum):
    """Why ``Trainer.train`` returned (a ``str``: ``TrainStatus.STOPPED == "stopped"``)."""

    FINISHED = "finished"        # total_steps reached
    STOPPED = "stopped"          # should_stop said so (a person, Ctrl-C, the worker)
    NUM_STEPS = "num_steps"      # the requested number of steps ran; the run can go on


@dataclass
class TrainResult:
    """How ``Trainer.train`` ended: its status, the step it reached and the last logged metrics."""

    status: TrainStatus
    step: int
    metrics: dict[str, Any] | None
