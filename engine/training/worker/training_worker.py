"""The background training worker: one run at a time (pretraining or fine-tuning), shared by every browser.

``TrainingWorker`` owns a daemon thread that prepares a run (corpus, vocabulary,
datasets, model) and trains it with ``Trainer.train``. Everything the UI needs is
read through thread-safe methods that never block on training:

* controls: ``start(spec)``, ``pause()``, ``resume()``, ``stop()``,
  ``save_checkpoint_now()`` (safe under concurrent clicks; ``start`` raises ``RunActiveError``
  while a run is active, ``save_checkpoint_now`` ``NoRunError`` when no run is training, the others
  are no-ops when there is nothing to act on; ``engine.training.worker.errors``);
* views: ``status()``, ``metrics_since(index)`` (every train/eval/checkpoint record of
  the current run, so every open browser sees the same curves), ``checkpoints()``,
  ``current_batch()`` (the masking view), ``eval_examples()`` (a fine-tuning run's held-out
  predictions after its latest evaluation);
* probing: ``priority()`` (a context manager; while any is held the trainer waits
  between steps) and ``snapshot_model()`` / ``snapshot()`` (an eval-mode copy of the
  live model taken between steps, so probes never see half-updated weights and never
  flip the training model's train/eval mode).

Threading design. One ``threading.Condition`` guards all shared state (``SharedState`` and
``LiveRun``, ``engine.training.worker.shared_state``; a run's ``RunState`` moves only as
``engine.training.worker.run_state.TRANSITIONS`` allows); each run has its own training thread (``RunThread``,
``engine.training.worker.run_thread``), which prepares the job with ``prepare_job`` and trains it with a
``WorkerCallback`` registered on the trainer (``engine.training.worker.callback``) and the worker's
model lock given to it; the heavy work (steps, evaluation, checkpoint writing) happens outside the
condition.

Faults: a run folder that cannot be created (read-only or full disk) makes ``start`` raise
a ``RunFolderError`` (a ``ValueError``) that says so; a "save now" that cannot be written raises the
``DiskFault`` (an ``OSError``, ``engine.disk_faults``) to its caller while the run goes on; an
exception on the training thread ends the run as ``failed`` with a one-line message.

Nothing here prints; messages go to the ``logging`` module. No UI code here.
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from engine.model.loaded_model import LoadedModel
from engine.disk_faults import DiskFault, make_folder
from engine.data.batch_view import describe_batch
from engine.model.heads import BertWithHeads
from engine.training.tasks.eval_examples import EvalExamples
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.runs.run_catalog import RunSummary, checkpoints_newest_first, run_summaries
from engine.training.runs.run_folder import CheckpointInfo, RunFolder
from engine.training.runs.run_names import run_name
from engine.training.loop.trainer import Trainer
from engine.training.worker.callback import WAIT_SLICE_S
from engine.training.worker.continue_run import continue_spec
from engine.training.worker.errors import NoRunError, RunActiveError, RunEndedError, RunFolderError
from engine.training.worker.run_state import RunState
from engine.training.worker.run_thread import RunThread
from engine.training.worker.shared_state import LiveRun, RunInfo, SharedState, WorkerStatus

logger = logging.getLogger(__name__)


class TrainingWorker:
    """Runs one training run at a time in a background thread (one worker per app)."""

    def __init__(self, runs_root: str | Path = "runs", snapshot_max_age_s: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.runs_root = Path(runs_root)
        self.snapshot_max_age_s = snapshot_max_age_s
        self._shared = SharedState(clock)          # ``clock``: when Start was pressed, and a status's elapsed
        self._model_lock = threading.Lock()       # held by the trainer around every step and evaluation
        self._snapshot_lock = threading.Lock()    # one snapshot copy at a time
        self._ids = itertools.count(1)
        self._snapshot: tuple[int, int, float, BertWithHeads] | None = None   # (run_id, step, time, model)

    # ------------------------------------------------------------------ controls
    def start(self, spec: JobSpec, notice: str | None = None) -> RunInfo:
        """Begin a run in the background; ``RunActiveError`` if one is active, ``RunFolderError`` if its folder
        cannot be made, ValueError if a setting is invalid. ``notice`` is shown with the run's status."""
        if not isinstance(spec, JobSpec):
            raise TypeError(f"start() takes a JobSpec, got {type(spec).__name__}")
        config = spec.validate()              # fast checks here, the slow work in the thread
        if spec.resume_from is not None:      # the run's own settings, and only allowed changes (fast: two files)
            try:
                config = resume_spec(spec.resume_from, spec.given_training(), spec.documents,
                                     spec.run_dir).training_config()
            except FileNotFoundError as exc:
                raise ValueError(str(exc)) from None
        with self._shared.cond:
            if self._shared.run is not None and self._shared.run.state.is_active:
                raise RunActiveError(self._shared.run.state, self._shared.run.run_dir.name)
            run_id = next(self._ids)
            try:
                run_dir = self._run_dir(spec)
            except OSError as exc:             # read-only or full data folder: say so (a DiskFault's sentence)
                raise RunFolderError(str(exc) if isinstance(exc, DiskFault) else
                                     f"cannot create the run folder: {exc.strerror or exc}") from None
            run = LiveRun(run_id, spec, config, run_dir, started=self._shared.clock())
            run.notice = notice
            self._shared.run = run
            self._shared.records, self._shared.dropped = [], 0
            self._snapshot = None
            self._shared.checkpoint_cache = None
            runner = RunThread(self._shared, run, self._model_lock)
            run.thread = runner.thread
            runner.start()
            self._shared.cond.notify_all()
        logger.info("training run %d started in %s", run_id, run_dir)
        return RunInfo(run_id, run_dir, config.total_steps, run.started)

    def continue_run(self, name: str, total_steps: int | None = None, device: str | None = None) -> RunInfo:
        """Resume the run ``name`` under the runs root from its newest complete checkpoint (``resume_spec``:
        exactly the steps the uninterrupted run would have taken), optionally to a new ``total_steps``.

        A damaged newest checkpoint is passed over for the newest good one (``resume_point``), and the run's
        status says so. ``CannotContinueError`` when the run is gone, damaged (its folder or ``run.json``), has
        no good checkpoint, already reached its total (and no larger total is given), or the new total is not
        past its step; ``RunActiveError`` while a run is active."""
        spec, note = continue_spec(self.runs_root, name, total_steps, device)
        return self.start(spec, notice=note)

    def runs(self) -> list[RunSummary]:
        """Every run under the runs root with its checkpoint count, step and total, newest first."""
        return run_summaries(self.runs_root)

    def pause(self) -> WorkerStatus:
        """Pause after the current step (no-op unless a run is active and not stopping)."""
        with self._shared.cond:
            run = self._shared.run
            if run is not None and run.state.is_active and not run.stop_requested:
                run.paused = True
                if run.state == RunState.RUNNING:
                    run.move_to(RunState.PAUSED, f"paused at step {run.step}")
                self._shared.cond.notify_all()
            return self._status_locked()

    def resume(self) -> WorkerStatus:
        """Continue a paused run (no-op otherwise)."""
        with self._shared.cond:
            run = self._shared.run
            if run is not None and run.paused and not run.stop_requested:
                run.paused = False
                if run.state == RunState.PAUSED:
                    run.move_to(RunState.RUNNING, f"step {run.step} / {run.total_steps}")
                self._shared.cond.notify_all()
            return self._status_locked()

    def stop(self, wait_s: float | None = None) -> WorkerStatus:
        """Finish the current step, save a checkpoint and end (no-op when no run is active).

        Returns at once, or after the run ended / ``wait_s`` seconds when given.
        """
        with self._shared.cond:
            run = self._shared.run
            if run is not None and run.state.is_active and not run.stop_requested:
                run.stop_requested, run.paused = True, False
                run.move_to(RunState.STOPPING, "stopping after the current step")
                self._shared.cond.notify_all()
                logger.info("training run %d: stop requested", run.run_id)
        if wait_s is not None and run is not None:
            self.join(wait_s)
        return self.status()

    def save_checkpoint_now(self, timeout_s: float = 120.0) -> Path | None:
        """Ask the training thread to checkpoint between steps; the path once written.

        None if ``timeout_s`` passed first (the save still happens). ``NoRunError`` when no run
        is training (none started, still preparing, or ended), ``RunEndedError`` when it failed before saving;
        ``DiskFault`` (an ``OSError``, one sentence) when the checkpoint could not be written
        (disk full, read-only folder): the run goes on and older checkpoints are untouched.
        """
        deadline = time.monotonic() + timeout_s
        with self._shared.cond:
            run = self._shared.run
            if run is None or not run.state.is_training or run.trainer is None:
                raise NoRunError(run.state if run is not None else RunState.IDLE)
            run.save_requested += 1
            ticket = run.save_requested
            self._shared.cond.notify_all()
            while run.save_done < ticket and run.state.is_active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._shared.cond.wait(min(left, WAIT_SLICE_S))
            if run.save_done >= ticket:
                result = run.save_results[min(t for t in run.save_results if t >= ticket)]
                if isinstance(result, OSError):
                    raise result
                return result
            if run.outcome in (RunState.FINISHED, RunState.STOPPED):   # its final checkpoint covers the request
                return run.last_checkpoint
            raise RunEndedError(run.state, run.message)

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until no run is active; True if none is (False after ``timeout_s``)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._shared.cond:
            while self._shared.run is not None and self._shared.run.state.is_active:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._shared.cond.wait(WAIT_SLICE_S if left is None else min(left, WAIT_SLICE_S))
            return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the active run (with its final checkpoint) and wait for it, up to ``timeout_s``."""
        self.stop(wait_s=timeout_s)

    # ------------------------------------------------------------------ views
    def status(self) -> WorkerStatus:
        with self._shared.cond:
            return self._status_locked()

    def metrics_since(self, index: int = 0, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Records of the current run from ``index`` on, and the index to ask from next time.

        Each record is ``{"kind": "train" | "eval" | "checkpoint" | "diverged", ...}``.
        When a new run started since ``index`` was handed out (``index`` is past the end),
        the new run's records come from its beginning, so the returned next index is then
        smaller than ``index`` (a client can reset its curves on that).
        """
        with self._shared.cond:
            total = self._shared.dropped + len(self._shared.records)
            if index > total:
                index = 0
            start = max(index, self._shared.dropped) - self._shared.dropped
            end = len(self._shared.records) if limit is None else min(len(self._shared.records), start + max(0, limit))
            return [dict(r) for r in self._shared.records[start:end]], self._shared.dropped + end

    def checkpoints(self) -> list[CheckpointInfo]:
        """Complete checkpoints of every run under the runs root, the experiments' runs too (and the current run),
        newest first."""
        with self._shared.cond:
            cached = self._shared.checkpoint_cache
            run_dir = self._shared.run.run_dir if self._shared.run is not None else None
        if cached is not None and time.monotonic() - cached[0] < 1.0:
            return list(cached[1])
        found = checkpoints_newest_first(self.runs_root, also=[run_dir] if run_dir is not None else [],
                                         experiments=True)
        with self._shared.cond:
            self._shared.checkpoint_cache = (time.monotonic(), found)
        return list(found)

    def current_batch(self) -> dict[str, Any] | None:
        """The first sequences of the latest training batch, for the masking view.

        ``{"step", "rows": [{"input_ids", "tokens", "labels", "label_tokens", "mask_kind",
        "mask_kind_names", "token_type_ids"}], "next_sentence_label": [...]}``; rows are cut
        at their padding; ``labels`` is -100 where ``mask_kind`` is 0 ("none").
        None before the first batch.
        """
        with self._shared.cond:
            run = self._shared.run
            snap = run.batch if run is not None else None
            tokenizer = run.tokenizer if run is not None else None
        return None if snap is None else describe_batch(snap, tokenizer)

    def eval_examples(self) -> EvalExamples | None:
        """What the current run's model predicted for its first held-out examples at its latest evaluation
        (``engine.training.tasks.eval_examples``); None before the first evaluation and for pretraining."""
        with self._shared.cond:
            return self._shared.run.examples if self._shared.run is not None else None

    @property
    def trainer(self) -> Trainer | None:
        """The current (or last) run's trainer; for tests and the CLI, not for probing."""
        with self._shared.cond:
            return self._shared.run.trainer if self._shared.run is not None else None

    # ------------------------------------------------------------------ probing
    @contextlib.contextmanager
    def priority(self) -> Iterator[None]:
        """While held (by any thread, nested or concurrent), the trainer waits between steps."""
        with self._shared.cond:
            self._shared.priority += 1
        try:
            yield
        finally:
            with self._shared.cond:
                self._shared.priority -= 1
                self._shared.cond.notify_all()

    def snapshot_model(self, max_age_s: float | None = None) -> BertWithHeads | None:
        """An eval-mode copy of the live model, taken between steps; None before a model exists.

        Reused while it is of the current step or younger than ``max_age_s`` (the worker's
        ``snapshot_max_age_s`` by default); otherwise a fresh copy is made (waiting for the
        current step, at most). Callers must treat it as read-only (it may be shared).
        """
        max_age = self.snapshot_max_age_s if max_age_s is None else max_age_s
        with self._snapshot_lock:
            with self._shared.cond:
                run = self._shared.run
                trainer = run.trainer if run is not None else None
                cached = self._snapshot
            if trainer is None:
                return None
            if cached is not None and cached[0] == run.run_id and (
                    cached[1] == trainer.global_step or time.monotonic() - cached[2] < max_age):
                return cached[3]
            with self.priority(), self._model_lock:     # priority: the trainer cannot take the next step first
                step = trainer.global_step
                model = copy.deepcopy(trainer.model)
            model.eval().requires_grad_(False)
            with self._shared.cond:
                if self._shared.run is run:
                    self._snapshot = (run.run_id, step, time.monotonic(), model)
            return model

    def snapshot(self, max_age_s: float | None = None) -> LoadedModel | None:
        """``snapshot_model`` with the run's tokenizer, as the probing tabs load models."""
        model = self.snapshot_model(max_age_s)
        with self._shared.cond:
            run = self._shared.run
            tokenizer = run.tokenizer if run is not None else None
            step = self._snapshot[1] if self._snapshot is not None else 0
        if model is None or run is None:
            return None
        return LoadedModel(model, tokenizer, model.config, f"live run {run.run_dir.name} (step {step})", None)

    # ------------------------------------------------------------------ internals
    def _run_dir(self, spec: JobSpec) -> Path:
        """The folder the run writes to: a resumed run's own (or ``spec.run_dir``), ``spec.run_dir``, or a
        new folder under the runs root named ``<task>-<yyyymmdd-hhmmss>`` (``run_name``), claimed under the lock so two quick starts never share one."""
        if spec.resume_from is not None:
            return Path(spec.run_dir) if spec.run_dir is not None else RunFolder.locate(spec.resume_from)[0].root
        if spec.run_dir is not None:
            return make_folder(spec.run_dir)
        return RunFolder.create_unique(self.runs_root, run_name(spec.task)).root

    def _status_locked(self) -> WorkerStatus:
        return self._shared.status()


__all__ = ["TrainingWorker"]
