"""The runs under a runs folder, as a person chooses among them: how far each got and whether it can go on.

``run_summaries(root)`` lists every run folder directly under ``root`` with its checkpoint count, the
step of its newest complete checkpoint and the total it was set to. It serves two choices: which run
to *continue* (``resumable``: a complete checkpoint short of the run's total steps) and which run the
probing tabs' "over checkpoints" views read (``checkpoints`` is how many they would find).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.training.jobs.run_folder import RunFolder
from engine.training.loop.state import read_checkpoint_info


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

    @property
    def resumable(self) -> bool:
        """A complete checkpoint exists and the run has steps left."""
        return self.checkpoints > 0 and (self.total_steps is None or self.step < self.total_steps)

    @property
    def label(self) -> str:
        """``run-x · step 150 / 300 · 3 checkpoints · shakespeare``."""
        total = f" / {self.total_steps:,}" if self.total_steps else ""
        parts = [self.name, f"step {self.step:,}{total}",
                 f"{self.checkpoints} checkpoint{'s' if self.checkpoints != 1 else ''}"]
        if self.corpus:
            parts.append(Path(self.corpus).name)
        return " · ".join(parts)


def summarize(run: RunFolder) -> RunSummary:
    """``run`` as a ``RunSummary`` (reads its spec and its newest checkpoint's small state file)."""
    found = run.checkpoints()
    spec = run.read_spec()
    total = None
    if found:
        try:
            total = int(read_checkpoint_info(found[0].path)["config"]["total_steps"])
        except (ValueError, KeyError, TypeError):
            total = None
    try:
        modified = found[0].created or found[0].path.stat().st_mtime if found else run.root.stat().st_mtime
    except OSError:
        modified = 0.0
    corpus = spec.get("corpus_label") or spec.get("corpus")
    return RunSummary(run.name, run.root, len(found), found[0].step if found else 0, total,
                      spec.get("task"), str(corpus) if corpus else None, float(modified))


def run_summaries(root: str | Path) -> list[RunSummary]:
    """Every run directly under ``root``, newest first."""
    return sorted((summarize(run) for run in RunFolder.runs_under(root)), key=lambda s: s.modified, reverse=True)


def find_run(root: str | Path, name: str) -> RunSummary:
    """The run called ``name`` under ``root``; FileNotFoundError (saying so) when it is not there."""
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise FileNotFoundError(f"no run named {name!r}; pick one from the list")
    folder = Path(root) / name
    if not RunFolder.is_run(folder):
        raise FileNotFoundError(f"the run {name} is gone (its folder was deleted or moved)")
    return summarize(RunFolder(folder))
