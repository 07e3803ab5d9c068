"""Which checkpoint and settings continue a named run of the runs folder (``TrainingWorker.continue_run``).

The run must be there, readable (its folder and ``run.json``) and have a good complete checkpoint: a damaged newest
one is passed over for the newest good one (``resume_point``), and the note says so. A new total must be past the
checkpoint's step; without one, the run must not have reached its own total. Every refusal is a
``CannotContinueError`` saying why.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from engine.training.jobs.resume_point import resume_point
from engine.training.runs.run_catalog import find_run
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.errors import CannotContinueError

logger = logging.getLogger(__name__)


def continue_spec(runs_root: Path, name: str, total_steps: int | None = None,
                  device: str | None = None) -> tuple[JobSpec, str | None]:
    """The ``JobSpec`` that continues run ``name`` under ``runs_root`` from its newest good checkpoint (optionally
    to ``total_steps``, on ``device``), and a note when a damaged newer checkpoint was passed over."""
    try:
        run = find_run(runs_root, name)
    except FileNotFoundError as exc:
        raise CannotContinueError(str(exc)) from None
    if run.blocked:
        raise CannotContinueError(f"the run {name} is damaged ({'; '.join(run.problems)}); {run.advice}")
    if run.checkpoints == 0:
        raise CannotContinueError(f"the run {name} has no complete checkpoint to continue from")
    try:
        point = resume_point(RunFolder(run.path))
    except ValueError as exc:
        raise CannotContinueError(str(exc)) from None
    step, total = point.checkpoint.step, point.checkpoint.total_steps or run.total_steps
    if total_steps is not None and total_steps <= step:
        raise CannotContinueError(f"the new total ({total_steps:,} steps) must be more than the {step:,} "
                                  f"steps {name} has done")
    if total_steps is None and total is not None and step >= total:
        raise CannotContinueError(f"the run {name} already reached its total of {total:,} steps; "
                                  "give a larger total to train it further")
    changes: dict[str, Any] = {}
    if total_steps is not None:
        changes["total_steps"] = total_steps
    if device is not None:
        changes["device"] = device
    if point.note:
        logger.warning("run %s: %s", name, point.note)
    return JobSpec(changes, resume_from=str(point.checkpoint.path)), point.note
