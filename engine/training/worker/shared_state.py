"""The state a background training run shares between its threads, and the snapshot every browser polls.

``SharedState`` is what the worker's caller threads and its training thread share: one
``threading.Condition`` guards all of it (the current ``LiveRun``, the records stream, the count
of interactive requests waiting). A run changes state only through ``LiveRun.move_to``, which checks
the move against ``engine.training.worker.run_state.TRANSITIONS``. ``status_of`` turns a ``LiveRun`` into
the immutable ``WorkerStatus`` the UI shows.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.eval_examples import EvalExamples
from engine.training.tasks.job_spec import JobSpec
from engine.training.runs.run_folder import CheckpointInfo
from engine.training.loop.throughput import Throughput
from engine.training.loop.trainer import Trainer
from engine.training.worker.run_state import RunState, check_transition

MAX_RECORDS = 100_000            # records kept in memory per run (the oldest are dropped beyond it)


@dataclass
class RunInfo:
    """What ``start`` answers: the run's id, directory and length."""

    run_id: int
    run_dir: Path
    total_steps: int
    started: float


@dataclass
class WorkerStatus:
    """A consistent snapshot of the worker for the UI (plain values, safe to keep)."""

    state: RunState                             # a plain string is taken too (and checked)
    message: str
    step: int = 0
    total_steps: int = 0
    run_id: int = 0
    run_dir: Path | None = None
    elapsed: float = 0.0                        # wall seconds since start(), i.e. since Start (preparation included)
    eta_s: float | None = None                  # seconds to total_steps at the run's pace; only while running
    metrics: dict[str, Any] | None = None       # the last train record
    eval_metrics: dict[str, Any] | None = None  # the last eval record
    last_checkpoint: Path | None = None
    outcome: RunState | None = None             # when ended: the terminal state (stopped, finished, ...)
    error: str | None = None                    # "Type: message" for failures and divergence
    traceback: str | None = None                # the full traceback of a failure (for logs, not the UI)
    records: int = 0                            # metrics_since's next index
    waiting: bool = False                       # the trainer is waiting between steps (paused / priority)
    tokens_per_s: float | None = None           # throughput over the last ~10 s of training (``Throughput``)
    task: str = TrainingConfig.task             # what the run trains (``TrainingConfig.task``; its default)
    examples_step: int | None = None            # the step of the latest held-out predictions (``eval_examples``)
    notice: str | None = None                   # said once at the start and kept: "Continuing from step-… because …"

    def __post_init__(self) -> None:
        self.state = RunState(self.state)
        self.outcome = None if self.outcome is None else RunState(self.outcome)

    @property
    def active(self) -> bool:
        return self.state.is_active


class LiveRun:
    """The mutable state of one run; read and written only under the worker's condition."""

    def __init__(self, run_id: int, spec: JobSpec, config: TrainingConfig, run_dir: Path,
                 started: float | None = None) -> None:
        self.run_id, self.spec, self.config, self.run_dir = run_id, spec, config, run_dir
        self.state, self.message = RunState.PREPARING, "starting"
        self.started = time.time() if started is None else started     # the worker's clock when start() was called
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
        self.throughput = Throughput()
        self.eval_metrics: dict[str, Any] | None = None
        self.last_checkpoint: Path | None = None
        self.outcome: RunState | None = None
        self.error: str | None = None
        self.traceback: str | None = None
        self.batch: dict[str, Any] | None = None
        self.examples: EvalExamples | None = None   # held-out predictions after the latest evaluation
        self.waiting = False
        self.waiting_since = 0.0
        self.thread: threading.Thread | None = None
        self.notice: str | None = None     # shown with the status (a continued run's fallback checkpoint)

    def move_to(self, state: RunState, message: str) -> None:
        """Enter ``state`` (or stay in it) with ``message``; ``IllegalTransition`` for a move ``TRANSITIONS``
        does not allow (a bug: the state is left as it was)."""
        self.state, self.message = check_transition(self.state, state), message


def status_of(run: LiveRun | None, records: int, clock: Callable[[], float] = time.time) -> WorkerStatus:
    """A snapshot of ``run`` (idle when None); ``records`` is the worker's record count; ``elapsed`` is
    ``clock()`` (or the run's end) less the moment Start was pressed. Call under the lock."""
    if run is None:
        return WorkerStatus(RunState.IDLE, "no training run yet", records=records)
    current = clock()
    now = run.ended or current
    eta = None
    if run.state == RunState.RUNNING and run.train_started is not None:     # no ETA while paused or stopping
        done = run.step - run.train_start_step
        active = current - run.train_started - run.waited
        if run.waiting:
            active -= current - run.waiting_since
        if done > 0 and active > 0:
            eta = max(0.0, (run.total_steps - run.step) * active / done)
    return WorkerStatus(run.state, run.message, run.step, run.total_steps, run.run_id, run.run_dir,
                        now - run.started, eta, dict(run.metrics) if run.metrics else None,
                        dict(run.eval_metrics) if run.eval_metrics else None, run.last_checkpoint,
                        run.outcome, run.error, run.traceback, records, run.waiting,
                        run.throughput.tokens_per_s, run.config.task,
                        run.examples.step if run.examples is not None else None, run.notice)


class SharedState:
    """What the worker's threads share; every field is read and written under ``cond``."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock                         # wall seconds: a run's start, end and elapsed (tests give a fake)
        self.cond = threading.Condition(threading.Lock())
        self.run: LiveRun | None = None
        self.priority = 0                          # interactive requests in progress (the trainer waits)
        self.records: list[dict[str, Any]] = []    # the current run's train / eval / checkpoint records
        self.dropped = 0                           # records dropped from the front (MAX_RECORDS)
        self.checkpoint_cache: tuple[float, list[CheckpointInfo]] | None = None

    def add_record(self, run: LiveRun, kind: str, record: dict[str, Any]) -> None:
        """Append a record of ``run`` (ignored when another run has started since) and update its state."""
        entry = {"kind": kind, **record}
        with self.cond:
            if self.run is not run:
                return
            self.records.append(entry)
            if len(self.records) > MAX_RECORDS:
                drop = len(self.records) - MAX_RECORDS
                del self.records[:drop]
                self.dropped += drop
            step = record.get("step")
            if kind == "train":
                run.metrics, run.step = dict(record), int(step)
                run.throughput.add(record)
                if run.state == RunState.RUNNING:
                    run.message = f"step {run.step} / {run.total_steps}"
            elif kind == "eval":
                run.eval_metrics = dict(record)
            elif kind == "checkpoint":
                run.last_checkpoint = Path(record["path"])
                self.checkpoint_cache = None
            self.cond.notify_all()

    def status(self) -> "WorkerStatus":
        """A snapshot of the current run; call under ``cond``."""
        return status_of(self.run, self.dropped + len(self.records), self.clock)
