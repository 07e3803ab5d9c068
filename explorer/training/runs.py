"""Continuing a stopped run from the Training tab: the runs to choose from and the Continue action."""
from __future__ import annotations

from typing import Any

from engine.training.runs.records import RunRecord
from engine.training.runs.run_catalog import find_run
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import spec_record
from engine.training.tasks.pretraining_settings import TASK
from engine.training.worker.errors import RunActiveError
from explorer.training import objective
from explorer.serving.gpu import training_device
from explorer.services import Services
from explorer.runs.status import status_markdown
from explorer.ui_errors import whole_number


def run_choices(services: Services) -> list[tuple[str, str]]:
    """(label, run name) of every run that can continue (a complete checkpoint short of its total, or a
    finished run, which can go on with a larger total, unless it kept only the model: a finished fine-tune),
    newest first; a damaged run is listed too, its label saying what is wrong and what to do (Continue then
    refuses it with the same reason)."""
    return [(s.label, s.name) for s in services.get_worker().runs()
            if (s.checkpoints > 0 and not s.finished_lean) or s.problems]


def continue_run(services: Services, run: str | None, total_steps: Any) -> str:
    """Resume ``run`` (its name; empty: the newest run with steps left) to its own total or to
    ``total_steps`` (0 or empty: keep the run's); the status as Markdown. ValueError (gr.Error for a bad total)
    says what is wrong: a finished fine-tune, which keeps only the model (``keep_optimizer_state="while-running"``),
    is refused with the engine's one sentence (``finished_lean_refusal``: start a new fine-tune from its checkpoint)."""
    worker = services.get_worker()
    total = None
    if total_steps not in (None, "", 0, 0.0):
        total = whole_number(total_steps, "New total steps", 1, 1_000_000)
    if not run:
        left = [s for s in worker.runs() if s.resumable]
        if not left:
            raise ValueError("There is no stopped run to continue; start a run first, or pick a finished one "
                             "and give a larger total.")
        run = left[0].name
    try:
        worker.continue_run(str(run), total, device=training_device())
    except RunActiveError as e:
        raise ValueError(f"A training run is already {e.state}; stop it before continuing {run}.") from None
    return status_markdown(worker.status())


def run_settings(services: Services, run: str | None) -> str:
    """The picked run's own objective settings (its ``run.json``), read-only; "" when none is picked or it cannot
    be read (Continue then says why)."""
    if not run:
        return ""
    try:
        summary = find_run(services.get_worker().runs_root, str(run))
    except FileNotFoundError:
        return ""
    record = spec_record(RunFolder(summary.path))
    if not isinstance(record, RunRecord) or (record.task or TASK) != TASK:
        return ""
    return objective.describe(record.record)
