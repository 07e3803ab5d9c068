"""The training thread of one background run: prepare the job, train it, and always end in a terminal state.

``RunThread`` owns the thread. It prepares the run with ``prepare_job`` (the same path as the
command lines), registers a ``WorkerCallback`` on the trainer and gives it the worker's model
lock (held around every step and evaluation, so snapshots see consistent weights). Any
exception ends the run as ``failed`` (or ``diverged`` for a NaN/inf loss) with a one-line
message; a write the disk refuses (full, read-only folder: a ``DiskFault``, ``engine.disk_faults``) ends it
with that fault's one sentence, which names the run folder, the step being saved and the last good checkpoint,
left as it was. A failure names the step it happened in (the step being trained, or the one just trained
while it is logged, evaluated or saved: ``WorkerCallback.failing_step``).
"""
from __future__ import annotations

import logging
import threading
import traceback as traceback_module
from typing import Any

from engine.training.loop.train_result import TrainStatus
from engine.disk_faults import DiskFault
from engine.training.jobs.pretraining_data import WARNING_PREFIX
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import checkpoint_name
from engine.training.loop.divergence import TrainingDiverged
from engine.training.loop.trainer import Trainer
from engine.training.worker.callback import WorkerCallback
from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import MAX_RECORDS, LiveRun, SharedState

logger = logging.getLogger("engine.training.worker.training_worker")
CONTINUE_HINT = "continue the run under *Continue a run*"     # what a disk fault's sentence says to do next


class RunThread:
    """One run's training thread."""

    def __init__(self, shared: SharedState, run: LiveRun, model_lock: threading.Lock) -> None:
        self.shared, self.run, self.model_lock = shared, run, model_lock
        self.callback = WorkerCallback(shared, run)
        self.thread = threading.Thread(target=self.main, name=f"bert-train-{run.run_id}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def main(self) -> None:
        """Prepare, train, and always end in a terminal state."""
        run, cond = self.run, self.shared.cond
        training = False               # past preparation (a failure names its step)
        try:
            trainer = self.prepare()
            if trainer is None:            # stopped while preparing
                self.finish(RunState.STOPPED, "stopped before training began")
                return
            training = True
            with cond:
                run.trainer, run.step = trainer, trainer.global_step
                run.train_started, run.train_start_step, run.waited = self.shared.clock(), trainer.global_step, 0.0
                if run.stop_requested:
                    pass                          # should_stop ends it before the first step
                elif run.paused:
                    run.move_to(RunState.PAUSED, f"paused at step {run.step}")
                else:
                    run.move_to(RunState.RUNNING, f"step {run.step} / {run.total_steps}")
                cond.notify_all()
            result = trainer.train()
            if result.status == TrainStatus.STOPPED:        # the trainer's TrainResult.status (should_stop said so)
                path = trainer.last_checkpoint
                if trainer.global_step > 0 and (path is None or path.name != checkpoint_name(trainer.global_step)
                                                or not path.exists()):
                    path = trainer.save_checkpoint()
                where = f"; saved {path.name}" if path is not None else ""
                self.finish(RunState.STOPPED, f"stopped at step {trainer.global_step}{where}")
            else:
                where = f"; checkpoint {trainer.last_checkpoint.name}" if trainer.last_checkpoint else ""
                self.finish(RunState.FINISHED, f"finished {trainer.global_step} steps{where}")
        except TrainingDiverged as exc:
            logger.warning("training run %d diverged: %s", run.run_id, exc)
            self.finish(RunState.DIVERGED, str(exc), error=f"{type(exc).__name__}: {exc}",
                        last_checkpoint=exc.last_checkpoint)
        except DiskFault as exc:       # a full or read-only disk: one sentence; the last good checkpoint is kept
            logger.error("training run %d: %s (%s)", run.run_id, exc, exc.errno_name)
            self.finish(RunState.FAILED, exc.sentence(CONTINUE_HINT if exc.kept is not None else None),
                        error=f"{exc.errno_name}: {exc}", traceback=traceback_module.format_exc(),
                        last_checkpoint=exc.kept)
        except BaseException as exc:  # noqa: BLE001 - any crash must end in "failed", never kill the app
            error = f"{type(exc).__name__}: {exc}"
            where = f"at step {self.callback.failing_step(run.trainer)}" if training else "while preparing"
            logger.error("training run %d failed %s", run.run_id, where, exc_info=True)
            self.finish(RunState.FAILED, f"the run failed {where}: {error}", error=error,
                        traceback=traceback_module.format_exc())

    def finish(self, state: RunState, message: str, **changes: Any) -> None:
        """End the run in the terminal ``state`` (also its ``outcome``) with ``message``; ``changes`` are set on
        the run first (a ``last_checkpoint`` of None is ignored)."""
        run, cond = self.run, self.shared.cond
        with cond:
            for name, value in changes.items():
                if name != "last_checkpoint" or value is not None:
                    setattr(run, name, value)
            run.move_to(state, message)
            run.outcome, run.ended = state, self.shared.clock()
            if run.trainer is not None:
                run.step = run.trainer.global_step
            self.shared.checkpoint_cache = None
            cond.notify_all()
        logger.info("training run %d ended: %s (%s)", run.run_id, state, message)

    def prepare(self) -> Trainer | None:
        """The run's trainer (``prepare_job``), with the worker's callback and lock; None if stopped meanwhile."""
        run, cond = self.run, self.shared.cond

        def progress(message: str) -> bool:
            with cond:
                if run.state == RunState.PREPARING:
                    run.message = message
                if message.startswith(WARNING_PREFIX):    # kept with the status after preparation (a notice)
                    warning = message[len(WARNING_PREFIX):]
                    run.notice = f"{run.notice} · {warning}" if run.notice else warning
                cond.notify_all()
                return not run.stop_requested

        spec = run.spec.replace(run_dir=str(run.run_dir))
        job = prepare_job(spec, progress, callbacks=[self.callback], lock=self.model_lock)
        if job is None:
            return None
        trainer = job.trainer
        with cond:
            run.tokenizer = job.tokenizer
            if job.checkpoint is not None:  # resumed: show the run's history so far
                run.config, run.total_steps = trainer.config, trainer.config.total_steps
                for record in job.history[-MAX_RECORDS:]:
                    self.shared.records.append(dict(record))
                last = [r for r in job.history if r.get("kind") == "train"]
                run.metrics = {k: v for k, v in last[-1].items() if k != "kind"} if last else None
                run.last_checkpoint = job.checkpoint
        return trainer
