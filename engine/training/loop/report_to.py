"""``report_to``: where a run's curves go besides ``metrics.jsonl``, as the Hugging Face Trainer's ``report_to``.

``none`` (the default) or ``tensorboard``: TensorBoard event files in the run's ``logs/`` folder
(``RunFolder.logs_dir``), written by ``TensorBoardCallback`` from the records the trainer logs (``on_log``,
main process only): every number of a ``train`` record as ``train/<name>`` (``loss``, ``lr``, ``grad_norm``,
``tokens_per_s`` and the task's metrics) and of an ``eval`` record as ``eval/<name>`` (``eval_mlm_loss`` ->
``eval/mlm_loss``), at the record's step. A resumed run appends to the same folder; its writer hides what
an earlier session logged after the checkpoint it resumes from (``purge_step``), as ``metrics.jsonl`` drops
those records, so the curves are those of the run that happened.

TensorBoard is optional (the ``logging`` extra, ``tensorboard==2.20.0``): ``check_report_to`` says so, naming
the extra, before a run starts. ``torch.utils.tensorboard`` is imported only when a run asks for it.
trackio is not offered: it keeps every run in one database under ``TRACKIO_DIR``, read once at import (not
the run folder), ``trackio.init`` prints to stdout, and it brings a web server's dependencies; it can import
these event files (``trackio.import_tf_events``).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from engine.checks import is_finite_number
from engine.training.loop.callbacks import TrainerCallback

REPORT_TO = ("none", "tensorboard")
MISSING_TENSORBOARD = ("report_to tensorboard needs the tensorboard package, which is not installed: install the "
                       "optional `logging` extra (pip install tensorboard==2.20.0)")
NOT_LOGGED = frozenset({"step", "elapsed"})     # the x axis, and time (TensorBoard keeps each point's wall time)


def check_report_to(name: str) -> None:
    """ValueError when ``name`` is not one of ``REPORT_TO``, or names a package that is not installed."""
    if name not in REPORT_TO:
        raise ValueError(f"report_to must be one of {', '.join(REPORT_TO)}, got {name!r}")
    if name == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
        raise ValueError(MISSING_TENSORBOARD)


def scalars(kind: str, record: dict[str, Any]) -> dict[str, float]:
    """The TensorBoard tags and values of one ``metrics.jsonl`` record (``train`` and ``eval`` only)."""
    if kind not in ("train", "eval"):
        return {}
    found = {}
    for name, value in record.items():
        if name not in NOT_LOGGED and is_finite_number(value):
            found[f"{kind}/{name.removeprefix('eval_') if kind == 'eval' else name}"] = float(value)
    return found


class TensorBoardCallback(TrainerCallback):
    """Writes the logged records to TensorBoard event files in ``log_dir`` (opened at the first record of a
    ``train`` call, closed at its end)."""

    def __init__(self, log_dir: str | Path, flush_secs: int = 5) -> None:
        check_report_to("tensorboard")
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError(MISSING_TENSORBOARD) from None
        self._writer_class = SummaryWriter
        self.log_dir, self.flush_secs = Path(log_dir), flush_secs
        self._writer: Any = None
        self._start: int | None = None       # the step this train call began at

    def on_step_begin(self, trainer: Any) -> None:
        if self._start is None:
            self._start = trainer.global_step

    def on_log(self, trainer: Any, kind: str, record: dict[str, Any]) -> None:
        values = scalars(kind, record)
        if not values or trainer.rank != 0:
            return
        if self._writer is None:
            start = self._start if self._start is not None else trainer.global_step
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._writer = self._writer_class(str(self.log_dir), purge_step=start + 1 if start else None,
                                              flush_secs=self.flush_secs)
        for tag, value in values.items():
            self._writer.add_scalar(tag, value, int(record["step"]))

    def on_train_end(self, trainer: Any) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer, self._start = None, None


def report_callbacks(report_to: str | None, log_dir: str | Path) -> list[TrainerCallback]:
    """The callbacks ``report_to`` asks for (``None`` is ``none``: no callback); ValueError as ``check_report_to``."""
    name = report_to or "none"
    check_report_to(name)
    return [TensorBoardCallback(log_dir)] if name == "tensorboard" else []
