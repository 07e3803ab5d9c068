"""The mutable state of one background training run, and the status snapshot taken of it.

``RunState`` is plain data guarded by the worker's condition (``engine.training.worker``); the
training thread (``engine.training.worker_thread``) and the control methods change it, and
``status_of`` turns it into the immutable ``WorkerStatus`` every browser polls.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from engine.training.run_spec import RunSpec, WorkerStatus
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.trainer import Trainer
from engine.training.config import TrainingConfig


class RunState:
    """The mutable state of one run; read and written only under the worker's condition."""

    def __init__(self, run_id: int, spec: RunSpec, config: TrainingConfig, run_dir: Path) -> None:
        self.run_id, self.spec, self.config, self.run_dir = run_id, spec, config, run_dir
        self.state, self.message = "preparing", "starting"
        self.started = time.time()
        self.ended: float | None = None
        self.total_steps = config.total_steps
        self.step = 0
        self.trainer: Trainer | None = None
        self.tokenizer: WordPieceTokenizer | None = None
        self.paused = self.stop_requested = False
        self.save_requested = 0            # sequence number of the newest save request
        self.save_done = 0                 # sequence number of the newest request served
        self.save_results: dict[int, Path | OSError] = {}   # served ticket -> the checkpoint, or why it failed
        self.train_started: float | None = None
        self.train_start_step = 0
        self.waited = 0.0                  # seconds spent waiting (paused / priority) since train_started
        self.metrics: dict[str, Any] | None = None
        self.eval_metrics: dict[str, Any] | None = None
        self.last_checkpoint: Path | None = None
        self.outcome: str | None = None
        self.error: str | None = None
        self.traceback: str | None = None
        self.batch: dict[str, Any] | None = None
        self.waiting = False
        self.waiting_since = 0.0
        self.thread: threading.Thread | None = None


def status_of(run: RunState | None, records: int) -> WorkerStatus:
    """A snapshot of ``run`` (idle when None); ``records`` is the worker's record count. Call under the lock."""
    if run is None:
        return WorkerStatus("idle", "no training run yet", records=records)
    now = run.ended or time.time()
    eta = None
    if run.state in ("running", "paused", "stopping") and run.train_started is not None:
        done = run.step - run.train_start_step
        active = time.time() - run.train_started - run.waited
        if run.waiting:
            active -= time.time() - run.waiting_since
        if done > 0 and active > 0:
            eta = max(0.0, (run.total_steps - run.step) * active / done)
    return WorkerStatus(run.state, run.message, run.step, run.total_steps, run.run_id, run.run_dir,
                        now - run.started, eta, dict(run.metrics) if run.metrics else None,
                        dict(run.eval_metrics) if run.eval_metrics else None, run.last_checkpoint,
                        run.outcome, run.error, run.traceback, records, run.waiting)
