"""What a run's checkpoints keep once the trainer has written a new one.

Three settings of ``TrainingConfig`` decide. ``keep_last_checkpoints`` keeps only the newest N (None: all). The
previous checkpoint saved for training time alone goes (``CheckpointPolicy.saved`` names it: one at a time bounds
what a crash loses). ``keep_optimizer_state`` says which checkpoints keep the optimizer and scheduler state that only
an exact resume needs (about twice the weights' size): "all" every one, "newest" only the newest, "while-running"
the same until the run finishes, when its last checkpoint is written without it (``ends_lean``, what Hugging Face
calls ``save_only_model``), its weights in ``final_dtype`` (a fine-tune's start model's dtype: fp16 stays fp16). The others stay models and start points, not resumable. Only rank 0 applies this.
"""
from __future__ import annotations

import logging
from pathlib import Path

from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import drop_optimizer_state

logger = logging.getLogger(__name__)


def ends_lean(config: TrainingConfig, step: int) -> bool:
    """Whether the checkpoint of ``step`` is written without optimizer and scheduler state: the one at
    ``total_steps`` under ``keep_optimizer_state="while-running"``."""
    return config.keep_optimizer_state == "while-running" and step >= config.total_steps


def keep_checkpoints(run: RunFolder, newest: Path, stale: Path | None, config: TrainingConfig) -> None:
    """After ``newest`` was written: delete ``stale`` (the previous checkpoint saved for time alone), prune to
    ``keep_last_checkpoints`` and, unless ``keep_optimizer_state="all"``, drop the optimizer and scheduler state of
    every other checkpoint (``drop_optimizer_state``; a damaged or unwritable one keeps what it has, with a warning)."""
    if stale is not None:
        run.remove_checkpoint(stale)
    run.prune(config.keep_last_checkpoints)
    if config.keep_optimizer_state != "all":
        for older in (c for c in run.checkpoints() if c.path != newest):
            try:
                drop_optimizer_state(older.path)
            except (OSError, ValueError) as exc:
                logger.warning("could not drop the optimizer state of %s: %s", older.name, exc)
