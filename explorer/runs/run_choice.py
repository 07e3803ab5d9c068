"""A training run as the over-training views offer it (``ModelRegistry.runs``): its name and the steps of its
checkpoints, with the label the run picker shows."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunChoice:
    """A training run as the over-training views offer it: its name and the steps of its checkpoints."""

    name: str
    checkpoints: int
    first_step: int
    last_step: int

    @property
    def label(self) -> str:
        """"run-a · 5 checkpoints, steps 100–500"."""
        if self.checkpoints == 1:
            return f"{self.name} · 1 checkpoint, step {self.last_step}"
        return f"{self.name} · {self.checkpoints} checkpoints, steps {self.first_step}–{self.last_step}"
