"""The runs under a runs folder, as a person chooses among them: how far each got and whether it can go on.

``run_summaries(root)`` lists every run folder directly under ``root`` with its checkpoint count, the
step of its newest complete checkpoint and the total it was set to. It serves two choices: which run
to *continue* (``resumable``: a complete checkpoint short of the run's total steps) and which run the
probing tabs' "over checkpoints" views read (``checkpoints`` is how many they would find).

Listing never raises: a run whose folder, ``run.json`` or checkpoints the server cannot read or parse is
listed with ``problems`` (each a short sentence) and its label says what is wrong and what to do.

``checkpoints_newest_first(root)`` lists the complete checkpoints of every run there (the model picker's list).

With ``experiments=True`` each also lists the runs an experiment wrote under ``<root>/experiments``
(``experiment_runs``: a bounded walk of its layout, each run named ``experiments:<experiment>:...`` and titled
``experiment · arm · seed k``); the default lists only the runs directly under ``root``, as before.

A view that follows runs as other processes write them (the Training tab's run browser) asks cheaper
questions first: ``run_names(root)`` (which runs there are, reading nothing inside them) and
``change_key(run)`` (the times that move when a run's summary may have changed).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from engine.training.runs.experiment_runs import checkpoints_of, is_experiment_run, listed_runs, locate
from engine.training.runs.records import Damaged, RunRecord
from engine.training.runs.run_folder import CheckpointInfo, CheckpointScan, RunFolder
from engine.training.runs.spec_file import spec_record


@dataclass(frozen=True)
class RunSummary:
    """One run folder, as listed for a person."""

    name: str
    path: Path
    checkpoints: int              # complete checkpoints
    step: int                     # the newest complete checkpoint's step (0 without one)
    total_steps: int | None       # what the run was set to (from that checkpoint's settings)
    task: str | None
    corpus: str | None
    modified: float               # newest checkpoint's time (or the folder's), for sorting
    problems: tuple[str, ...] = ()   # what is damaged, each a short sentence ("run.json: it is not valid JSON")
    blocked: bool = False            # a problem stops it from continuing (its spec or its folder)
    advice: str = ""                 # what to do about the problems
    finished_lean: bool = False      # finished, its last checkpoint keeps only the model: it cannot continue
    title: str = ""                  # what a person sees (an experiment's run: experiment · arm · seed); "": name

    @property
    def resumable(self) -> bool:
        """A complete checkpoint exists, nothing blocks it and the run has steps left."""
        return (self.checkpoints > 0 and not self.blocked
                and (self.total_steps is None or self.step < self.total_steps))

    @property
    def label(self) -> str:
        """``run-x · step 150 / 300 · 3 checkpoints · shakespeare``, then ``· damaged: <what>`` with what to do
        (an experiment's run starts with its title: ``bert-table8 · mix-100-0-0 · seed 1 · ...``)."""
        total = f" / {self.total_steps:,}" if self.total_steps else ""
        parts = [self.title or self.name, f"step {self.step:,}{total}",
                 f"{self.checkpoints} checkpoint{'s' if self.checkpoints != 1 else ''}"]
        if self.corpus:
            parts.append(Path(self.corpus).name)
        if self.finished_lean:
            parts.append("finished, model only (fine-tune from it)")
        if self.problems:
            parts.append(f"⚠ damaged: {'; '.join(self.problems)}; {self.advice}")
        return " · ".join(parts)


def summarize(run: RunFolder, scan: CheckpointScan | None = None) -> RunSummary:
    """``run`` as a ``RunSummary`` (reads its spec and its checkpoints' small state files, unless ``scan`` is
    its ``scan_checkpoints()`` already made); never raises."""
    unreadable = run.problem()
    if unreadable:                        # nothing inside can be read either: one problem, said once
        return RunSummary(run.name, run.root, 0, 0, None, None, None, _mtime(run.root), (unreadable,), True,
                          "fix the folder's permissions or remove it", title=run.title)
    scan = scan if scan is not None else run.scan_checkpoints()
    found = scan.found
    spec = spec_record(run)
    problems = []
    if isinstance(spec, Damaged):
        problems.append(spec.reason)
    problems += scan.problems + [f"{c.name}: {c.damage}" for c in found if c.damage]
    problems += [f"{c.name}: {c.weights_damage}" for c in found if c.weights_damage]
    total = next((c.total_steps for c in found if c.total_steps is not None), None)
    modified = found[0].written if found else _mtime(run.root)
    record = spec if isinstance(spec, RunRecord) else RunRecord({})
    blocked = isinstance(spec, Damaged)
    advice = ("it cannot continue: start a new run (its checkpoints still load for probing)" if blocked
              else "Continue passes over a damaged checkpoint to the newest good one")
    return RunSummary(run.name, run.root, len(found), found[0].step if found else 0, total,
                      record.task, record.corpus, float(modified), tuple(problems), blocked,
                      advice if problems else "", bool(found) and found[0].ends_lean, run.title)


def run_summaries(root: str | Path, experiments: bool = False) -> list[RunSummary]:
    """Every run directly under ``root`` (with ``experiments`` also every experiment's run:
    ``experiment_runs``), newest first."""
    return sorted((summarize(run) for run in listed_runs(root, unreadable=True, experiments=experiments)),
                  key=lambda s: s.modified, reverse=True)


def run_names(root: str | Path, experiments: bool = False) -> tuple[str, ...]:
    """The names of the runs ``run_summaries(root, experiments)`` lists (direct runs sorted by name, then the
    experiments'), reading nothing inside them."""
    return tuple(run.name for run in listed_runs(root, unreadable=True, experiments=experiments))


def checkpoints_newest_first(runs_root: str | Path, also: Iterable[str | Path] = (),
                             experiments: bool = False) -> list[CheckpointInfo]:
    """The complete checkpoints of every run under ``runs_root`` (with ``experiments`` also the experiments' runs)
    and of the run folders ``also`` (which may lie elsewhere), newest first: by when each was written
    (``CheckpointInfo.written``), then step, then path."""
    runs = set(listed_runs(runs_root, experiments=experiments)) | {RunFolder(path) for path in also}
    found = [info for run in runs for info in (checkpoints_of(run) if is_experiment_run(run) else run.checkpoints())]
    return sorted(found, key=lambda c: (c.written, c.step, str(c.path)), reverse=True)


def change_key(run: RunFolder) -> tuple[float, ...]:
    """What moves when ``run``'s summary may have changed: the modification times of its folder, its checkpoints
    folder (a checkpoint renamed in, pruned or cleaned up) and its ``run.json`` (0 where they cannot be read)."""
    return tuple(_mtime(path) for path in (run.root, run.checkpoints_dir, run.spec_path))


def find_run(root: str | Path, name: str, experiments: bool = False) -> RunSummary:
    """The run called ``name`` under ``root`` (with ``experiments`` an experiment's run may be named too:
    ``experiment_runs.locate``); FileNotFoundError (saying so) when it is not there."""
    run = locate(root, name) if experiments else None
    if run is None:
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise FileNotFoundError(f"no run named {name!r}; pick one from the list")
        run = RunFolder(Path(root) / name)
    if not RunFolder.is_run(run.root):
        problem = run.problem() if _exists(run.root) else None
        if problem:
            raise FileNotFoundError(f"the run {run.title} cannot be used: {problem}; fix its permissions or "
                                    "remove it")
        raise FileNotFoundError(f"the run {run.title} is gone (its folder was deleted or moved)")
    return summarize(run)


def _mtime(path: Path) -> float:
    try:
        return float(path.stat().st_mtime)
    except (OSError, ValueError):
        return 0.0


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
