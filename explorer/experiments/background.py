"""The app's one experiment at a time: ``ExperimentRunner`` runs ``engine.experiments.runner.run_experiment`` on one
background thread, under ``<runs folder>/experiments``, and keeps what the live view shows about it (its state, the
last thing it said, how it ended). Stop is asked between pretraining steps and between arms; a stopped experiment
continues where it stopped when started again (the runner reads what is done and resumes the rest).

The runner knows nothing of widgets: the tab checks the form and the access policy, and ``busy`` (a function
``runner_for`` gives it) says when the training worker has a run going; the worker's tabs ask the runner back
(``Services.experiment_busy``, through ``busy_message``), so the two never train at once.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from engine.experiments.definitions import Experiment, Scale
from engine.experiments.runner import ExperimentStopped, run_experiment
from explorer.services import Services

logger = logging.getLogger(__name__)


class ExperimentState(StrEnum):
    """What the runner is doing: nothing yet, training, ending after the current step, or how it ended."""

    IDLE = "idle"
    TRAINING = "training"
    ENDING = "ending"            # Stop was pressed: stopping after the current step
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"


IDLE, TRAINING, ENDING = ExperimentState.IDLE, ExperimentState.TRAINING, ExperimentState.ENDING
STOPPED, FINISHED, FAILED = ExperimentState.STOPPED, ExperimentState.FINISHED, ExperimentState.FAILED
ACTIVE = (TRAINING, ENDING)
_MADE = threading.Lock()          # makes each app's one runner once (runner_for)


class ExperimentBusy(RuntimeError):
    """An experiment or a training run is going: a second one is refused (the message says which)."""


@dataclass(frozen=True)
class ExperimentJob:
    """What was started: the experiment and the scale it runs at."""

    experiment: Experiment
    scale: Scale

    @property
    def key(self) -> str:
        """Names this job in the browser (a new key: the curves start over)."""
        return f"{self.experiment.name}|{self.scale}"


@dataclass(frozen=True)
class RunnerStatus:
    """The runner at one moment: the job (None before the first Start), its state, the last message the
    experiment said, the error it failed with, when it started and ended (``time.time()``), and a version that
    moves whenever any of them does."""

    job: ExperimentJob | None
    state: ExperimentState
    message: str
    error: str | None
    started: float | None
    ended: float | None
    version: int

    @property
    def active(self) -> bool:
        """Running, or stopping after the current step."""
        return self.state in ACTIVE


class ExperimentRunner:
    """Runs one experiment at a time on a background thread (``start`` / ``stop`` / ``status``)."""

    def __init__(self, root: str | Path, busy: Callable[[], str | None] = lambda: None) -> None:
        self.root = Path(root)
        self._busy = busy
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._versions = itertools.count(1)
        self._status = RunnerStatus(None, IDLE, "", None, None, None, 0)

    def status(self) -> RunnerStatus:
        """What the runner is doing now."""
        with self._lock:
            return self._status

    @property
    def running(self) -> bool:
        """Whether an experiment is training (or stopping)."""
        return self.status().active

    def busy_message(self) -> str | None:
        """The sentence that refuses a training run while an experiment trains (None when none does)."""
        st = self.status()
        if not st.active or st.job is None:
            return None
        return (f"The experiment {st.job.experiment.name} is training: the app trains one thing at a time. Stop it "
                "in the Experiments tab first.")

    def start(self, job: ExperimentJob) -> RunnerStatus:
        """Start ``job`` in the background (continuing what an earlier start of it left); ``ExperimentBusy`` while
        another experiment or a training run is going."""
        with self._lock:
            if self._status.active:
                raise ExperimentBusy(f"The experiment {self._status.job.experiment.name} is running: stop it "
                                     "first, or wait for it to end.")
            training = self._busy()
            if training:
                raise ExperimentBusy(training)
            self._stop.clear()
            self._set(job=job, state=TRAINING, message="starting…", error=None, started=time.time(), ended=None)
            self._thread = threading.Thread(target=self._run, args=(job,), name=f"experiment-{job.experiment.name}",
                                            daemon=True)
            self._thread.start()
            return self._status

    def stop(self) -> RunnerStatus:
        """Ask the running experiment to stop after its current step (a checkpoint is saved there)."""
        with self._lock:
            if self._status.state == TRAINING:
                self._stop.set()
                self._set(state=ENDING, message="stopping after this step…")
            return self._status

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background thread to end (tests, shutdown); whether it did."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _shown(self, text: str) -> str:
        """``text`` with the experiments folder's server path written as ``<runs>/experiments`` (a public page
        never shows the server's directory layout)."""
        return text.replace(str(self.root), "<runs>/experiments")

    def _say(self, message: str) -> None:
        with self._lock:
            if self._status.state == TRAINING:
                self._set(message=self._shown(str(message)))

    def _run(self, job: ExperimentJob) -> None:
        try:
            run_experiment(self.root, job.experiment, job.scale, self._say, should_stop=self._stop.is_set)
        except ExperimentStopped:
            self._end(STOPPED, "stopped: press Start to continue where it stopped")
        except Exception as exc:          # a failed arm ends the experiment with its reason, never the app
            logger.exception("experiment %s failed", job.experiment.name)
            self._end(FAILED, "failed", self._shown(f"{type(exc).__name__}: {exc}"))
        else:
            self._end(FINISHED, "finished: every arm and seed measured")

    def _end(self, state: str, message: str, error: str | None = None) -> None:
        with self._lock:
            self._set(state=state, message=message, error=error, ended=time.time())

    def _set(self, **changes: object) -> None:
        """Replace fields of the status (the lock held) and move its version."""
        fields = {**vars(self._status), **changes, "version": next(self._versions)}
        self._status = RunnerStatus(**fields)       # type: ignore[arg-type]


def runner_for(services: Services) -> ExperimentRunner:
    """The app's one experiment runner (``services.experiments``; experiments under ``<runs folder>/experiments``),
    made on first use; it refuses to start while the training worker has a run going."""
    worker = services.get_worker()
    with _MADE:
        if not isinstance(services.experiments, ExperimentRunner):
            def training() -> str | None:
                st = worker.status()
                return (f"A {st.task} run is {st.state}: the app trains one thing at a time. Stop it in the Training "
                        "or Fine-tune tab before starting an experiment.") if st.active else None

            services.experiments = ExperimentRunner(worker.runs_root / "experiments", busy=training)
        return services.experiments
