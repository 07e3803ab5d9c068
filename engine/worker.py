"""The background training worker: one pretraining run at a time, shared by every browser.

``TrainingWorker`` owns a daemon thread that prepares a run (corpus, vocabulary,
datasets, model) and trains it with ``Trainer.train``. Everything the UI needs is
read through thread-safe methods that never block on training:

* controls: ``start(spec)``, ``pause()``, ``resume()``, ``stop()``,
  ``save_checkpoint_now()`` (safe under concurrent clicks; ``start`` raises ValueError
  while a run is active, the others are no-ops when there is nothing to act on);
* views: ``status()``, ``metrics_since(index)`` (every train/eval/checkpoint record of
  the current run, so every open browser sees the same curves), ``checkpoints()``,
  ``current_batch()`` (the masking view);
* probing: ``priority()`` (a context manager; while any is held the trainer waits
  between steps) and ``snapshot_model()`` / ``snapshot()`` (an eval-mode copy of the
  live model taken between steps, so probes never see half-updated weights and never
  flip the training model's train/eval mode).

Threading design. One ``threading.Condition`` guards all shared state; the training
thread does its heavy work (steps, evaluation, checkpoint writing) outside it. The
trainer is driven only through hooks the worker controls, without changing
``engine.trainer``:

* ``should_stop`` (called by ``Trainer.train`` before every step) is where the
  training thread serves "save checkpoint now" requests, waits while paused or while a
  priority section is held (polling the condition with a timeout), and ends the run
  on ``stop()``;
* the trainer instance's ``step``/``evaluate`` are wrapped to run under a model lock,
  which ``snapshot_model`` takes to copy consistent weights;
* the training dataset's ``batch`` is wrapped to keep the first rows of the latest
  batch for ``current_batch``.

Nothing here prints; messages go to the ``logging`` module. No UI code here.
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import threading
import time
import traceback as traceback_module
from pathlib import Path
from typing import Any, Iterator

from .checkpoints import LoadedModel
from .batch_view import capture_rows, describe_batch
from .heads import BertWithHeads
from .run_setup import prepare_run
from .run_spec import ACTIVE_STATES, STATES, RunInfo, RunSpec, WorkerStatus  # noqa: F401  (re-exported)
from .tokenizer import WordPieceTokenizer
from .trainer import Trainer, TrainingDiverged
from .training_config import TrainingConfig
from .training_state import CHECKPOINTS_DIR, CheckpointInfo, checkpoint_name, list_checkpoints

logger = logging.getLogger(__name__)

MAX_RECORDS = 100_000            # records kept in memory per run (the oldest are dropped beyond it)
BATCH_ROWS = 2                   # sequences of the latest batch kept for the masking view
_WAIT_SLICE_S = 0.25             # the training thread re-checks its flags at least this often while waiting


class _Run:
    """The mutable state of one run; guarded by the worker's condition."""

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


class TrainingWorker:
    """Runs one training run at a time in a background thread (one worker per app)."""

    def __init__(self, runs_root: str | Path = "runs", snapshot_max_age_s: float = 2.0) -> None:
        self.runs_root = Path(runs_root)
        self.snapshot_max_age_s = snapshot_max_age_s
        self._cond = threading.Condition(threading.Lock())
        self._model_lock = threading.Lock()       # held by the training thread during step/evaluate
        self._snapshot_lock = threading.Lock()    # one snapshot copy at a time
        self._run: _Run | None = None
        self._ids = itertools.count(1)
        self._priority = 0
        self._records: list[dict[str, Any]] = []
        self._dropped = 0                         # records dropped from the front (MAX_RECORDS)
        self._snapshot: tuple[int, int, float, BertWithHeads] | None = None   # (run_id, step, time, model)
        self._checkpoint_cache: tuple[float, list[CheckpointInfo]] | None = None

    # ------------------------------------------------------------------ controls
    def start(self, spec: RunSpec) -> RunInfo:
        """Begin a run in the background; ValueError if one is active or a setting is invalid."""
        if not isinstance(spec, RunSpec):
            raise TypeError(f"start() takes a RunSpec, got {type(spec).__name__}")
        config = spec.validate()              # fast validation here, the slow work in the thread
        with self._cond:
            if self._run is not None and self._run.state in ACTIVE_STATES:
                raise ValueError(f"a training run is already {self._run.state} ({self._run.run_dir.name}); "
                                 "stop it before starting another")
            run_id = next(self._ids)
            run_dir = self._run_dir(spec, run_id)
            run = _Run(run_id, spec, config, run_dir)
            self._run = run
            self._records, self._dropped = [], 0
            self._snapshot = None
            self._checkpoint_cache = None
            run.thread = threading.Thread(target=self._main, args=(run,), name=f"bert-train-{run_id}", daemon=True)
            run.thread.start()
            self._cond.notify_all()
        logger.info("training run %d started in %s", run_id, run_dir)
        return RunInfo(run_id, run_dir, config.total_steps, run.started)

    def pause(self) -> WorkerStatus:
        """Pause after the current step (no-op unless a run is active and not stopping)."""
        with self._cond:
            run = self._run
            if run is not None and run.state in ("preparing", "running", "paused") and not run.stop_requested:
                run.paused = True
                if run.state == "running":
                    run.state, run.message = "paused", f"paused at step {run.step}"
                self._cond.notify_all()
            return self._status_locked()

    def resume(self) -> WorkerStatus:
        """Continue a paused run (no-op otherwise)."""
        with self._cond:
            run = self._run
            if run is not None and run.paused and not run.stop_requested:
                run.paused = False
                if run.state == "paused":
                    run.state, run.message = "running", f"step {run.step} / {run.total_steps}"
                self._cond.notify_all()
            return self._status_locked()

    def stop(self, wait_s: float | None = None) -> WorkerStatus:
        """Finish the current step, save a checkpoint and end (no-op when no run is active).

        Returns at once, or after the run ended / ``wait_s`` seconds when given.
        """
        with self._cond:
            run = self._run
            if run is not None and run.state in ACTIVE_STATES and not run.stop_requested:
                run.stop_requested, run.paused = True, False
                run.state, run.message = "stopping", "stopping after the current step"
                self._cond.notify_all()
                logger.info("training run %d: stop requested", run.run_id)
        if wait_s is not None and run is not None:
            self.join(wait_s)
        return self.status()

    def save_checkpoint_now(self, timeout_s: float = 120.0) -> Path | None:
        """Ask the training thread to checkpoint between steps; the path once written.

        None if ``timeout_s`` passed first (the save still happens). ValueError when no run
        is training (none started, still preparing, or ended).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            run = self._run
            if run is None or run.state not in ("running", "paused", "stopping") or run.trainer is None:
                state = run.state if run is not None else "idle"
                raise ValueError(f"no run is training (the worker is {state}); nothing to checkpoint")
            run.save_requested += 1
            ticket = run.save_requested
            self._cond.notify_all()
            while run.save_done < ticket and run.state in ACTIVE_STATES:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, _WAIT_SLICE_S))
            return run.last_checkpoint

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until no run is active; True if none is (False after ``timeout_s``)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._run is not None and self._run.state in ACTIVE_STATES:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(_WAIT_SLICE_S if left is None else min(left, _WAIT_SLICE_S))
            return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the active run (with its final checkpoint) and wait for it, up to ``timeout_s``."""
        self.stop(wait_s=timeout_s)

    # ------------------------------------------------------------------ views
    def status(self) -> WorkerStatus:
        with self._cond:
            return self._status_locked()

    def metrics_since(self, index: int = 0, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Records of the current run from ``index`` on, and the index to ask from next time.

        Each record is ``{"kind": "train" | "eval" | "checkpoint" | "diverged", ...}``.
        When a new run started since ``index`` was handed out (``index`` is past the end),
        the new run's records come from its beginning, so the returned next index is then
        smaller than ``index`` (a client can reset its curves on that).
        """
        with self._cond:
            total = self._dropped + len(self._records)
            if index > total:
                index = 0
            start = max(index, self._dropped) - self._dropped
            end = len(self._records) if limit is None else min(len(self._records), start + max(0, limit))
            return [dict(r) for r in self._records[start:end]], self._dropped + end

    def checkpoints(self) -> list[CheckpointInfo]:
        """Complete checkpoints of every run under the runs root (and the current run), newest first."""
        with self._cond:
            cached = self._checkpoint_cache
            run_dir = self._run.run_dir if self._run is not None else None
        if cached is not None and time.monotonic() - cached[0] < 1.0:
            return list(cached[1])
        run_dirs: set[Path] = set()
        roots = {self.runs_root}
        if run_dir is not None:
            run_dirs.add(run_dir)
        for root in roots:
            if root.is_dir():
                run_dirs.update(p for p in root.iterdir() if (p / CHECKPOINTS_DIR).is_dir())
        found = [info for directory in run_dirs for info in list_checkpoints(directory)]
        found.sort(key=lambda c: (c.created or _mtime(c.path), c.step), reverse=True)
        with self._cond:
            self._checkpoint_cache = (time.monotonic(), found)
        return list(found)

    def current_batch(self) -> dict[str, Any] | None:
        """The first sequences of the latest training batch, for the masking view.

        ``{"step", "rows": [{"input_ids", "tokens", "labels", "label_tokens", "mask_kind",
        "mask_kind_names", "token_type_ids"}], "next_sentence_label": [...]}``; rows are cut
        at their padding; ``labels`` is -100 where ``mask_kind`` is 0 ("none").
        None before the first batch.
        """
        with self._cond:
            run = self._run
            snap = run.batch if run is not None else None
            tokenizer = run.tokenizer if run is not None else None
        return None if snap is None else describe_batch(snap, tokenizer)

    @property
    def trainer(self) -> Trainer | None:
        """The current (or last) run's trainer; for tests and the CLI, not for probing."""
        with self._cond:
            return self._run.trainer if self._run is not None else None

    # ------------------------------------------------------------------ probing
    @contextlib.contextmanager
    def priority(self) -> Iterator[None]:
        """While held (by any thread, nested or concurrent), the trainer waits between steps."""
        with self._cond:
            self._priority += 1
        try:
            yield
        finally:
            with self._cond:
                self._priority -= 1
                self._cond.notify_all()

    def snapshot_model(self, max_age_s: float | None = None) -> BertWithHeads | None:
        """An eval-mode copy of the live model, taken between steps; None before a model exists.

        Reused while it is of the current step or younger than ``max_age_s`` (the worker's
        ``snapshot_max_age_s`` by default); otherwise a fresh copy is made (waiting for the
        current step, at most). Callers must treat it as read-only (it may be shared).
        """
        max_age = self.snapshot_max_age_s if max_age_s is None else max_age_s
        with self._snapshot_lock:
            with self._cond:
                run = self._run
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
            with self._cond:
                if self._run is run:
                    self._snapshot = (run.run_id, step, time.monotonic(), model)
            return model

    def snapshot(self, max_age_s: float | None = None) -> LoadedModel | None:
        """``snapshot_model`` with the run's tokenizer, as the probing tabs load models."""
        model = self.snapshot_model(max_age_s)
        with self._cond:
            run = self._run
            tokenizer = run.tokenizer if run is not None else None
            step = self._snapshot[1] if self._snapshot is not None else 0
        if model is None or run is None:
            return None
        return LoadedModel(model, tokenizer, model.config, f"live run {run.run_dir.name} (step {step})", None)

    # ------------------------------------------------------------------ internals
    def _run_dir(self, spec: RunSpec, run_id: int) -> Path:
        if spec.resume_from is not None:
            return Path(spec.resume_from) if (Path(spec.resume_from) / CHECKPOINTS_DIR).is_dir() \
                else Path(spec.resume_from).parent.parent
        root = Path(spec.runs_root) if spec.runs_root is not None else self.runs_root
        name = spec.run_name or time.strftime("run-%Y%m%d-%H%M%S")
        root.mkdir(parents=True, exist_ok=True)
        for suffix in itertools.count(1):
            path = root / (name if suffix == 1 else f"{name}-{suffix}")
            try:
                path.mkdir()          # claimed here, under the lock: two quick starts never share a directory
                return path
            except FileExistsError:
                continue
        raise AssertionError("unreachable")

    def _status_locked(self) -> WorkerStatus:
        run = self._run
        total = self._dropped + len(self._records)
        if run is None:
            return WorkerStatus("idle", "no training run yet", records=total)
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
                            run.outcome, run.error, run.traceback, total, run.waiting)

    def _set(self, run: _Run, **changes: Any) -> None:
        with self._cond:
            for name, value in changes.items():
                setattr(run, name, value)
            self._cond.notify_all()

    def _add_record(self, run: _Run, kind: str, record: dict[str, Any]) -> None:
        entry = {"kind": kind, **record}
        with self._cond:
            if self._run is not run:
                return
            self._records.append(entry)
            if len(self._records) > MAX_RECORDS:
                drop = len(self._records) - MAX_RECORDS
                del self._records[:drop]
                self._dropped += drop
            step = record.get("step")
            if kind == "train":
                run.metrics, run.step = dict(record), int(step)
                if run.state == "running":
                    run.message = f"step {run.step} / {run.total_steps}"
            elif kind == "eval":
                run.eval_metrics = dict(record)
            elif kind == "checkpoint":
                run.last_checkpoint = Path(record["path"])
                self._checkpoint_cache = None
            self._cond.notify_all()

    def _main(self, run: _Run) -> None:
        """The training thread: prepare, train, and always end in a terminal state."""
        phase = "preparing"
        try:
            trainer = self._prepare(run)
            if trainer is None:            # stopped while preparing
                self._finish(run, "finished", "stopped before training began", "stopped")
                return
            phase = "training"
            with self._cond:
                run.trainer, run.step = trainer, trainer.global_step
                run.train_started, run.train_start_step, run.waited = time.time(), trainer.global_step, 0.0
                if run.stop_requested:
                    pass                          # should_stop ends it before the first step
                elif run.paused:
                    run.state, run.message = "paused", f"paused at step {run.step}"
                else:
                    run.state, run.message = "running", f"step {run.step} / {run.total_steps}"
                self._cond.notify_all()
            result = trainer.train(callback=lambda kind, record: self._add_record(run, kind, record),
                                   should_stop=lambda: self._between_steps(run, trainer))
            if result.status == "stopped":
                path = trainer.last_checkpoint
                if trainer.global_step > 0 and (path is None or path.name != checkpoint_name(trainer.global_step)
                                                or not path.exists()):
                    path = self._save(run, trainer)
                where = f"; saved {path.name}" if path is not None else ""
                self._finish(run, "finished", f"stopped at step {trainer.global_step}{where}", "stopped")
            else:
                where = f"; checkpoint {trainer.last_checkpoint.name}" if trainer.last_checkpoint else ""
                self._finish(run, "finished", f"finished {trainer.global_step} steps{where}", "finished")
        except TrainingDiverged as exc:
            logger.warning("training run %d diverged: %s", run.run_id, exc)
            self._finish(run, "diverged", str(exc), "diverged", error=f"{type(exc).__name__}: {exc}",
                         last_checkpoint=exc.last_checkpoint)
        except BaseException as exc:  # noqa: BLE001 - any crash must end in "failed", never kill the app
            error = f"{type(exc).__name__}: {exc}"
            where = f"at step {run.step + 1}" if phase == "training" else "while preparing"
            logger.error("training run %d failed %s", run.run_id, where, exc_info=True)
            self._finish(run, "failed", f"the run failed {where}: {error}", "failed", error=error,
                         traceback=traceback_module.format_exc())

    def _finish(self, run: _Run, state: str, message: str, outcome: str, **changes: Any) -> None:
        with self._cond:
            for name, value in changes.items():
                if name != "last_checkpoint" or value is not None:
                    setattr(run, name, value)
            run.state, run.message, run.outcome, run.ended = state, message, outcome, time.time()
            if run.trainer is not None:
                run.step = run.trainer.global_step
            self._checkpoint_cache = None
            self._cond.notify_all()
        logger.info("training run %d ended: %s (%s)", run.run_id, state, message)

    def _prepare(self, run: _Run) -> Trainer | None:
        """Corpus -> tokenizer -> datasets -> model -> trainer (``run_setup``); None if stopped meanwhile."""
        def progress(message: str) -> bool:
            with self._cond:
                if run.state == "preparing":
                    run.message = message
                self._cond.notify_all()
                return not run.stop_requested

        prepared = prepare_run(run.spec, run.config, run.run_dir, progress)
        if prepared is None:
            return None
        trainer = prepared.trainer
        with self._cond:
            run.tokenizer = prepared.tokenizer
            if prepared.checkpoint is not None:  # resumed: show the run's history so far
                run.config, run.total_steps = trainer.config, trainer.config.total_steps
                for record in prepared.history[-MAX_RECORDS:]:
                    self._records.append(dict(record))
                last = [r for r in prepared.history if r.get("kind") == "train"]
                run.metrics = {k: v for k, v in last[-1].items() if k != "kind"} if last else None
                run.last_checkpoint = prepared.checkpoint
        self._tap_batches(run, prepared.train_data)
        self._wrap_trainer(trainer)
        return trainer

    def _wrap_trainer(self, trainer: Trainer) -> None:
        """Run this trainer's steps and evaluations under the model lock (for snapshots)."""
        step, evaluate = trainer.step, trainer.evaluate
        lock = self._model_lock

        def locked_step(*args: Any, **kwargs: Any) -> dict[str, Any]:
            with lock:
                return step(*args, **kwargs)

        def locked_evaluate(*args: Any, **kwargs: Any) -> dict[str, Any]:
            with lock:
                return evaluate(*args, **kwargs)

        trainer.step, trainer.evaluate = locked_step, locked_evaluate

    def _tap_batches(self, run: _Run, dataset: Any) -> None:
        """Keep the first rows of every training batch the trainer reads (for ``current_batch``)."""
        read = dataset.batch

        def batch(epoch: int, index: int):
            result = read(epoch, index)
            try:
                step = (run.trainer.global_step + 1) if run.trainer is not None else run.step + 1
                snap = capture_rows(result, step, BATCH_ROWS)
                with self._cond:
                    run.batch = snap
            except Exception:  # noqa: BLE001 - the view is best effort; never break training for it
                logger.debug("could not capture the batch for the masking view", exc_info=True)
            return result

        dataset.batch = batch

    def _save(self, run: _Run, trainer: Trainer) -> Path:
        path = trainer.save_checkpoint()
        self._add_record(run, "checkpoint", {"step": trainer.global_step, "path": str(path)})
        return path

    def _between_steps(self, run: _Run, trainer: Trainer) -> bool:
        """``should_stop``: serve saves, wait while paused or outranked, end on stop."""
        waited_from: float | None = None
        with self._cond:
            try:
                while True:
                    run.step = trainer.global_step
                    if run.save_requested > run.save_done:
                        ticket = run.save_requested
                        self._cond.release()
                        try:
                            if trainer.last_checkpoint is not None and trainer.last_checkpoint.exists() and \
                                    trainer.last_checkpoint.name == checkpoint_name(trainer.global_step):
                                path = trainer.last_checkpoint       # this step is already saved
                            else:
                                path = self._save(run, trainer)
                        finally:
                            self._cond.acquire()
                        run.last_checkpoint, run.save_done = path, ticket
                        self._cond.notify_all()
                        continue
                    if run.stop_requested:
                        return True
                    if run.paused or self._priority > 0:
                        if waited_from is None:
                            waited_from, run.waiting = time.time(), True
                            run.waiting_since = waited_from
                            self._cond.notify_all()
                        if run.paused and run.state == "running":
                            run.state, run.message = "paused", f"paused at step {run.step}"
                        self._cond.wait(_WAIT_SLICE_S)
                        continue
                    if run.state == "paused":
                        run.state = "running"
                    return False
            finally:
                if waited_from is not None:
                    run.waited += time.time() - waited_from
                    run.waiting = False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


__all__ = ["ACTIVE_STATES", "RunInfo", "RunSpec", "STATES", "TrainingWorker", "WorkerStatus"]
