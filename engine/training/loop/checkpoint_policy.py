"""When the trainer saves a checkpoint: every ``checkpoint_every`` steps, at the last step, and once
``checkpoint_every_s`` seconds of training have passed since the last save, so a crash loses minutes, not
the run (a fine-tuning run with ``checkpoint_every=0`` otherwise writes nothing before its last step).

Time is the run's own training time (``Trainer.elapsed``: seconds spent in steps, over all sessions, restored
on resume), so pauses, evaluations and waits for interactive requests do not count, and a fake clock given
to the trainer drives it in tests. Under DDP each process measures its own time; rank 0 decides and the
decision is broadcast, so every rank saves at the same step (``save_checkpoint`` meets at a barrier).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from engine.training.loop import distributed as dist


@dataclass
class CheckpointPolicy:
    """Answers "save now?" after each optimizer step (the trainer saves the last step whatever it says).
    ``every_steps`` 0 and ``every_s`` 0 or None mean never."""

    every_steps: int
    every_s: float | None
    saved_at: float = 0.0        # training seconds (``Trainer.elapsed``) at the last save or the start
    time_only: Path | None = None   # the newest checkpoint saved for time alone (the next save replaces it)

    def by_steps(self, step: int) -> bool:
        """True on every ``every_steps``-th step."""
        return bool(self.every_steps and step % self.every_steps == 0)

    def by_time(self, elapsed: float) -> bool:
        """True once ``every_s`` seconds of training passed since the last save (this process's view)."""
        return bool(self.every_s) and elapsed - self.saved_at >= self.every_s

    def due(self, step: int, elapsed: float, device: torch.device | str = "cpu") -> bool:
        """Save after ``step``? The same answer on every process (rank 0's clock decides)."""
        if self.by_steps(step):
            return True
        if not self.every_s:
            return False
        return dist.main_process_flag(self.by_time(elapsed), device)

    def saved(self, elapsed: float, path: Path | None = None, for_time: bool = False) -> Path | None:
        """A checkpoint was written (or loaded) at ``elapsed`` training seconds: the timer starts again.

        Returns the previous checkpoint that was saved for time alone, now stale (None if there is none), so
        the caller deletes it: time checkpoints bound what a crash loses, and one of them at a time is enough
        (a long run with ``keep_last_checkpoints=None`` would otherwise keep one every few minutes). ``path``
        is the checkpoint just written; ``for_time`` says it was written for time alone."""
        self.saved_at = elapsed
        stale = self.time_only if self.time_only != path else None
        self.time_only = path if for_time else None
        return stale
