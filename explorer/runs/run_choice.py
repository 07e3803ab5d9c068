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
    title: str = ""          # what a person sees (an experiment's run: experiment · arm · seed); "": the name

    @property
    def label(self) -> str:
        """"run-a · 5 checkpoints, steps 100–500"."""
        shown = self.title or self.name
        if self.checkpoints == 1:
            return f"{shown} · 1 checkpoint, step {self.last_step}"
        return f"{shown} · {self.checkpoints} checkpoints, steps {self.first_step}–{self.last_step}"
