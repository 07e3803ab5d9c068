"""The body of the worker's training thread: prepare a run, train it, and always end it in a terminal state.

``RunThread`` is the half of ``engine.training.worker.TrainingWorker`` that runs on the training
thread. It drives ``Trainer.train`` only through hooks, without changing ``engine.training.trainer``:

* ``should_stop`` (``_between_steps``, called before every step) serves "save checkpoint
  now" requests, waits while paused or while a priority section is held (polling the
  condition with a timeout), and ends the run on ``stop()``;
* the trainer instance's ``step``/``evaluate`` are wrapped to run under the model lock,
  which ``snapshot_model`` takes to copy consistent weights;
* the training dataset's ``batch`` is wrapped to keep the first rows of the latest batch.

Any exception ends the run as ``failed`` (or ``diverged`` for a NaN/inf loss) with a
one-line message; a checkpoint that cannot be written (disk full, read-only folder) says
so and names the last complete checkpoint, which is left as it was. A failed "save now"
is reported to its caller and the run goes on.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback as traceback_module
from pathlib import Path
from typing import Any

from engine.data.batch_view import capture_rows
from engine.checkpoints.hf_format import CheckpointWriteError
from engine.training.run_setup import prepare_run
from engine.training.trainer import Trainer, TrainingDiverged
from engine.training.run_folder import CheckpointInfo, checkpoint_name
from engine.training.worker_run import RunState

logger = logging.getLogger("engine.training.worker")

MAX_RECORDS = 100_000            # records kept in memory per run (the oldest are dropped beyond it)
BATCH_ROWS = 2                   # sequences of the latest batch kept for the masking view
WAIT_SLICE_S = 0.25              # the training thread re-checks its flags at least this often while waiting


class RunThread:
    """The training-thread half of ``TrainingWorker``; it shares the worker's lock and state."""

    _cond: threading.Condition
    _model_lock: threading.Lock
    _run: RunState | None
    _priority: int
    _records: list[dict[str, Any]]
    _dropped: int
    _checkpoint_cache: tuple[float, list[CheckpointInfo]] | None

    def _add_record(self, run: RunState, kind: str, record: dict[str, Any]) -> None:
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

    def _main(self, run: RunState) -> None:
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
        except CheckpointWriteError as exc:
            logger.error("training run %d could not write a checkpoint: %s", run.run_id, exc)
            with self._cond:
                last = run.last_checkpoint if run.last_checkpoint is not None and run.last_checkpoint.exists() else None
            kept = (f"the last complete checkpoint, {last.name}, is intact" if last is not None
                    else "no checkpoint was saved before it")
            self._finish(run, "failed", f"the run stopped at step {run.step}: {exc}; {kept}", "failed",
                         error=f"checkpoint not saved: {exc}", traceback=traceback_module.format_exc())
        except BaseException as exc:  # noqa: BLE001 - any crash must end in "failed", never kill the app
            error = f"{type(exc).__name__}: {exc}"
            where = f"at step {run.step + 1}" if phase == "training" else "while preparing"
            logger.error("training run %d failed %s", run.run_id, where, exc_info=True)
            self._finish(run, "failed", f"the run failed {where}: {error}", "failed", error=error,
                         traceback=traceback_module.format_exc())

    def _finish(self, run: RunState, state: str, message: str, outcome: str, **changes: Any) -> None:
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

    def _prepare(self, run: RunState) -> Trainer | None:
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

    def _tap_batches(self, run: RunState, dataset: Any) -> None:
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

    def _save(self, run: RunState, trainer: Trainer) -> Path:
        path = trainer.save_checkpoint()
        self._add_record(run, "checkpoint", {"step": trainer.global_step, "path": str(path)})
        return path

    def _serve_save(self, run: RunState, trainer: Trainer) -> Path | OSError:
        """Write the requested checkpoint (called without the lock); a write error is returned, not raised."""
        if trainer.last_checkpoint is not None and trainer.last_checkpoint.exists() and \
                trainer.last_checkpoint.name == checkpoint_name(trainer.global_step):
            return trainer.last_checkpoint       # this step is already saved
        try:
            return self._save(run, trainer)
        except OSError as exc:                   # disk full / read-only: report it, keep training
            logger.warning("training run %d: checkpoint requested at step %d not saved: %s", run.run_id,
                           trainer.global_step, exc)
            return exc

    def _between_steps(self, run: RunState, trainer: Trainer) -> bool:
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
                            result = self._serve_save(run, trainer)
                        finally:
                            self._cond.acquire()
                        if isinstance(result, Path):
                            run.last_checkpoint = result
                        run.save_results[ticket] = result
                        run.save_done = ticket
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
                        self._cond.wait(WAIT_SLICE_S)
                        continue
                    if run.state == "paused":
                        run.state = "running"
                    return False
            finally:
                if waited_from is not None:
                    run.waited += time.time() - waited_from
                    run.waiting = False
