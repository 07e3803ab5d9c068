"""What an experiment's folder says, read cheaply on every tick: each arm-seed's pretraining curve (its
``metrics.jsonl`` followed by a ``MetricsTail``: only the bytes appended since the last read, into a bounded
``MetricsHistory``, at most once per ``REFRESH_S`` however many browsers look), the numbers of the arm-seeds that
are done (their ``results.json``), and where the experiment is (the first arm-seed in run order without numbers).
Arms whose pretraining is the same (BERT's Table 7: one model used several ways) share one run per seed
(``runner.pretrain_dir``); ``pretraining_runs`` lists each run once, with how many arms use it.

Nothing here raises on a file's content: a damaged ``results.json`` is left out and named in ``problems``."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from engine.experiments.definitions import Arm
from engine.experiments.runner import ArmResult, pretrain_dir, read_result, seed_dir
from engine.training.runs.metrics_tail import MetricsHistory, MetricsTail
from engine.training.runs.run_folder import RunFolder
from explorer.experiments.background import ExperimentJob

REFRESH_S = 1.0            # a run's metrics are read at most this often
MAX_RECORDS = 2_000        # records kept per arm-seed (evenly thinned past it: MetricsHistory)
MAX_FOLLOWED = 128         # arm-seed runs followed at once (least recently read dropped first)


@dataclass(frozen=True)
class ArmSeed:
    """One arm with one seed, in run order: its index among the arms, the arm, the seed, its folder, and the
    pretraining run it uses (its own ``pretrain/``, or the one it shares)."""

    index: int
    arm: Arm
    seed: int
    folder: Path
    pretrain: Path | None = None

    @property
    def pretrain_dir(self) -> Path:
        """The arm-seed's pretraining run folder (shared with the arms of the same pretraining)."""
        return self.pretrain if self.pretrain is not None else self.folder / "pretrain"


def arm_seeds(root: Path, job: ExperimentJob) -> list[ArmSeed]:
    """Every arm and seed of ``job`` in the order the runner takes them (seed by seed, arm by arm)."""
    e = job.experiment
    return [ArmSeed(i, arm, seed, seed_dir(root, e, arm, seed, job.scale), pretrain_dir(root, e, arm, seed, job.scale))
            for seed in range(job.scale.seeds) for i, arm in enumerate(e.arms)]


def pretraining_runs(root: Path, job: ExperimentJob) -> list[tuple[ArmSeed, int]]:
    """Each pretraining run of ``job`` once, in run order: the first arm-seed that uses it, and how many arms do."""
    runs: dict[Path, list[ArmSeed]] = {}
    for one in arm_seeds(root, job):
        runs.setdefault(one.pretrain_dir, []).append(one)
    return [(users[0], len(users)) for users in runs.values()]


@dataclass
class FollowedRun:
    """One arm-seed's ``metrics.jsonl``, read so far."""

    tail: MetricsTail
    history: MetricsHistory = field(default_factory=lambda: MetricsHistory(MAX_RECORDS))
    read_at: float | None = None


class CurveReaders:
    """The followed runs, shared by every browser (one per app)."""

    def __init__(self) -> None:
        self._runs: OrderedDict[Path, FollowedRun] = OrderedDict()
        self._lock = threading.Lock()

    def history(self, run_dir: Path, clock: float | None = None) -> MetricsHistory:
        """The records of the run at ``run_dir`` so far (read again when ``REFRESH_S`` has passed)."""
        clock = time.monotonic() if clock is None else clock
        with self._lock:
            run = self._runs.pop(run_dir, None) or FollowedRun(MetricsTail(RunFolder(run_dir).metrics_path))
            self._runs[run_dir] = run
            while len(self._runs) > MAX_FOLLOWED:
                self._runs.popitem(last=False)
            if run.read_at is None or clock - run.read_at >= REFRESH_S:
                run.read_at = clock
                run.tail.read(run.history)
            return run.history


@dataclass(frozen=True)
class Progress:
    """Where an experiment is: the numbers so far (run order), problems reading them, and the arm-seed being
    worked on (None when every one is done)."""

    results: tuple[ArmResult, ...]
    problems: tuple[str, ...]
    current: ArmSeed | None
    total: int


def progress(root: Path, job: ExperimentJob) -> Progress:
    """Read the experiment's ``results.json`` files (a few small files) and find the arm-seed after the last."""
    found, problems, current = [], [], None
    every = arm_seeds(root, job)
    for one in every:
        result = read_result(one.folder)
        if isinstance(result, ArmResult):
            found.append(result)
        elif isinstance(result, str):
            problems.append(result)
        if not isinstance(result, ArmResult) and current is None:
            current = one
    return Progress(tuple(found), tuple(problems), current, len(every))


def latest_step(history: MetricsHistory) -> int | None:
    """The step of the run's newest training record (None before its first)."""
    record = history.latest.get("train")
    step = record.get("step") if record else None
    return step if isinstance(step, int) else None
