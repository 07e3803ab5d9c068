"""The worker's trainer callback: how a background run is paused, stopped, saved on demand and watched.

``WorkerCallback`` is registered on the run's ``Trainer`` (``engine.training.loop.callbacks``):

* ``should_stop`` (before every step) serves "save checkpoint now" requests, waits while the run is
  paused or while an interactive request holds priority (re-checking at least every
  ``WAIT_SLICE_S``), and ends the run on ``stop()``;
* ``on_log`` / ``on_save`` put every train, eval, checkpoint and diverged record in the shared
  records stream that every browser reads;
* ``on_batch`` keeps the first rows of the latest training batch for the masking view;
* ``on_evaluate`` keeps what a fine-tuning model predicts for a few held-out examples
  (``engine.training.tasks.eval_examples``), for the Fine-tune tab's table of examples it gets wrong.

A failed "save now" (disk full, read-only folder) is handed to whoever asked; the run goes on.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from engine.data.batch_view import capture_rows
from engine.training.loop.callbacks import TrainerCallback
from engine.training.tasks.eval_examples import eval_examples
from engine.training.runs.run_folder import checkpoint_name
from engine.training.loop.trainer import Trainer
from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import LiveRun, SharedState

logger = logging.getLogger("engine.training.worker.training_worker")

BATCH_ROWS = 2                   # sequences of the latest batch kept for the masking view
WAIT_SLICE_S = 0.25              # the training thread re-checks its flags at least this often while waiting


class WorkerCallback(TrainerCallback):
    """Connects one run's trainer to the worker's shared state."""

    def __init__(self, shared: SharedState, run: LiveRun) -> None:
        self.shared, self.run = shared, run
        self.stepping = False            # inside ``Trainer.step`` (its global_step not yet counted up)

    def on_step_begin(self, trainer: Trainer) -> None:
        self.stepping = True

    def on_step_end(self, trainer: Trainer, metrics: dict[str, Any]) -> None:
        self.stepping = False

    def failing_step(self, trainer: Trainer | None) -> int:
        """The step a failure happened in: the one being trained, or, after it (logging, evaluating, saving),
        the one just trained; never ``total_steps + 1``."""
        if trainer is None:
            return self.run.step
        return trainer.global_step + 1 if self.stepping else trainer.global_step

    # ------------------------------------------------------------------ records
    def on_log(self, trainer: Trainer, kind: str, record: dict[str, Any]) -> None:
        self.shared.add_record(self.run, kind, record)

    def on_save(self, trainer: Trainer, path: Path) -> None:
        self.shared.add_record(self.run, "checkpoint", {"step": trainer.global_step, "path": str(path)})

    def on_batch(self, trainer: Trainer, batch: Any) -> None:
        try:
            objective = getattr(trainer.train_data, "objective", None)       # pretraining data: its mask mix
            snap = capture_rows(batch, trainer.global_step + 1, BATCH_ROWS,
                                *([objective.mask_mix] if objective is not None else []))
        except Exception:  # noqa: BLE001 - the view is best effort; never break training for it
            logger.debug("could not capture the batch for the masking view", exc_info=True)
            return
        with self.shared.cond:
            self.run.batch = snap

    def on_evaluate(self, trainer: Trainer, metrics: dict[str, Any]) -> None:
        try:
            examples = eval_examples(trainer)
        except Exception:  # noqa: BLE001 - the table is best effort; never break training for it
            logger.warning("could not predict the held-out examples", exc_info=True)
            return
        if examples is not None:
            with self.shared.cond:
                self.run.examples = examples
                self.shared.cond.notify_all()

    # ------------------------------------------------------------------ between steps
    def should_stop(self, trainer: Trainer) -> bool:
        """Serve saves, wait while paused or outranked, end on stop."""
        run, cond = self.run, self.shared.cond
        waited_from: float | None = None
        with cond:
            try:
                while True:
                    run.step = trainer.global_step
                    if run.save_requested > run.save_done:
                        ticket = run.save_requested
                        cond.release()
                        try:
                            result = self.save_now(trainer)
                        finally:
                            cond.acquire()
                        if isinstance(result, Path):
                            run.last_checkpoint = result
                        run.save_results[ticket] = result
                        run.save_done = ticket
                        cond.notify_all()
                        continue
                    if run.stop_requested:
                        return True
                    if run.paused or self.shared.priority > 0:
                        if waited_from is None:
                            waited_from, run.waiting = self.shared.clock(), True
                            run.waiting_since = waited_from
                            cond.notify_all()
                        if run.paused and run.state in (RunState.RUNNING, RunState.PAUSED):
                            run.move_to(RunState.PAUSED, f"paused at step {run.step}")
                        cond.wait(WAIT_SLICE_S)
                        continue
                    if run.state == RunState.PAUSED:
                        run.move_to(RunState.RUNNING, run.message)
                    return False
            finally:
                if waited_from is not None:
                    run.waited += self.shared.clock() - waited_from
                    run.waiting = False

    def save_now(self, trainer: Trainer) -> Path | OSError:
        """Write the requested checkpoint (called without the lock); a write error is returned, not raised."""
        last = trainer.last_checkpoint
        if last is not None and last.exists() and last.name == checkpoint_name(trainer.global_step):
            return last                          # this step is already saved
        try:
            return trainer.save_checkpoint()
        except OSError as exc:                   # disk full / read-only: report it, keep training
            logger.warning("training run %d: checkpoint requested at step %d not saved: %s", self.run.run_id,
                           trainer.global_step, exc)
            return exc
