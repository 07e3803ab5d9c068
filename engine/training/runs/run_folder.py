"""A training run on disk: one folder type that names every path in it and lists, prunes and finds its checkpoints.

Layout of a run folder (the only place that knows it; everything else goes through ``RunFolder``)::

    <run>/
      run.json                  the job spec (JobSpec.to_record), read back on resume (spec_file.py reads and writes it)
      metrics.jsonl             one JSON record per logged train / eval / checkpoint event
      tokenizer/                the run's vocabulary (runs that trained their own)
      logs/                     TensorBoard event files, when the run reports to TensorBoard (report_to)
      corpus.txt | corpus.jsonl the text the run trains on, when it was given as text (pasted or uploaded):
                                kept here so that a resume reads exactly the same text
      checkpoints/
        step-000300/            Hugging Face layout + explorer_state.json + training_state.pt
                                (runs written before it was renamed have trainer_state.json; both are read)
        .step-000300.tmp-*      a checkpoint being written (renamed in when complete)

A checkpoint is complete (listed, resumable) only when ``training_state.pt`` is present; it
is written last (what a resumed run may change: ``resume_rules``). Listing never raises: what cannot be read is left
out and named, and a damaged ``explorer_state.json`` / ``run.json`` is a ``Damaged`` (``engine.training.runs.records``),
not an error.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.checkpoints.hf_format import recover_interrupted_writes, work_tag
from engine.disk_faults import make_folder, writing
from engine.folder_listing import list_entries
from engine.training.runs.fs_checks import is_dir, is_file, weights_problem, why
from engine.training.runs.legacy import LEGACY_SPEC_FILE
from engine.training.runs.records import Damaged
from engine.training.runs.state import STATE_FILE, read_checkpoint_record

logger = logging.getLogger(__name__)

SPEC_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINTS_DIR = "checkpoints"
TOKENIZER_DIR = "tokenizer"
LOGS_DIR = "logs"
CORPUS_FILES = {"txt": "corpus.txt", "jsonl": "corpus.jsonl"}   # the run's copy of given text, by format
_STEP_DIR = re.compile(r"^step-(\d+)$")

def checkpoint_name(step: int) -> str:
    """``step-000123``."""
    return f"step-{step:06d}"


@dataclass
class CheckpointInfo:
    """A complete checkpoint of a run (resumable too when it keeps its optimizer state: ``has_optimizer_state``,
    always the newest's); ``damage`` says what is wrong with its small record
    (``explorer_state.json``), whose fields then keep their defaults (the weights may still load)."""

    path: Path
    step: int
    epoch: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)       # the last training metrics before it
    eval_metrics: dict[str, Any] | None = None                   # the evaluation at this step, if any
    created: float = 0.0                                         # time.time() when written
    total_steps: int | None = None                               # what the run was set to then
    damage: str | None = None                                    # "explorer_state.json: epoch is 'x', ..."
    weights_damage: str | None = None                            # "model.safetensors: incomplete metadata ..."
    ends_lean: bool = False                                      # a finished run's model-only last checkpoint
    folder: "RunFolder | None" = field(default=None, repr=False, compare=False)   # the run that listed it

    @property
    def loadable(self) -> bool:
        """Whether its weights passed the header and size check (a damaged small record alone still loads)."""
        return self.weights_damage is None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def run(self) -> "RunFolder":
        """The run folder this checkpoint belongs to (as listed: an experiment's run keeps its name and title)."""
        return self.folder if self.folder is not None else RunFolder.of_checkpoint(self.path)

    @property
    def written(self) -> float:
        """When it was written: ``created``, else (older checkpoints have none) its folder's mtime, else 0."""
        if self.created:
            return self.created
        try:
            return self.path.stat().st_mtime
        except (OSError, ValueError):
            return 0.0


@dataclass
class CheckpointScan:
    """What listing a run's checkpoints found: the complete ones, newest first, and what could not be read."""

    found: list[CheckpointInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)          # "step-000010 cannot be read (Permission denied)"


def is_complete(directory: str | Path) -> bool:
    """True when ``directory`` holds weights, config and ``training_state.pt`` (resumable); False too where
    the server cannot look (an unreadable folder never raises here)."""
    directory = Path(directory)
    return all(is_file(directory / name) for name in ("config.json", "model.safetensors", STATE_FILE))


class RunFolder:
    """The folder of one training run: its paths and its checkpoints (its spec file: ``spec_file``). ``name`` is
    how the app refers to it (its folder's name; an experiment's run: ``engine.training.runs.experiment_runs``),
    ``title`` how a person sees it (its name unless given)."""

    def __init__(self, root: str | Path, name: str | None = None, title: str | None = None) -> None:
        self.root = Path(root)
        self._name, self._title = name, title

    def __repr__(self) -> str:
        return f"RunFolder({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunFolder) and self.root == other.root

    def __hash__(self) -> int:
        return hash(self.root)

    # ------------------------------------------------------------------ where things are
    @property
    def name(self) -> str:
        return self._name or self.root.name

    @property
    def title(self) -> str:
        """What a person sees: ``bert-table8 · mix-100-0-0 · seed 1 · ...`` for an experiment's run, else the name."""
        return self._title or self.name

    @property
    def spec_path(self) -> Path:
        """``run.json``, the job spec (read and written by ``engine.training.runs.spec_file``)."""
        return self.root / SPEC_FILE

    @property
    def legacy_spec_path(self) -> Path:
        """``run_spec.json``, the spec file of runs written before ``run.json`` (read when that is no good)."""
        return self.root / LEGACY_SPEC_FILE

    @property
    def metrics_path(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / CHECKPOINTS_DIR

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / TOKENIZER_DIR

    @property
    def logs_dir(self) -> Path:
        """Where ``report_to`` loggers write (TensorBoard event files)."""
        return self.root / LOGS_DIR

    def corpus_path(self, name: str) -> Path:
        """The run's copy of its text, ``name`` as ``run.json`` records it (``corpus.txt`` / ``corpus.jsonl``);
        ValueError for any other name (``run.json`` is a file a person can edit)."""
        if name not in CORPUS_FILES.values():
            raise ValueError(f"{self.spec_path.name} names {name!r} as the run's text; expected one of "
                             f"{', '.join(CORPUS_FILES.values())}")
        return self.root / name

    def checkpoint_dir(self, step: int) -> Path:
        """Where the checkpoint of ``step`` is (or will be) written."""
        return self.checkpoints_dir / checkpoint_name(step)

    # ------------------------------------------------------------------ finding runs
    @staticmethod
    def is_run(path: str | Path) -> bool:
        """True when ``path`` is a run folder (it has a checkpoints folder); False where the server cannot look."""
        return is_dir(Path(path) / CHECKPOINTS_DIR)

    def problem(self) -> str | None:
        """Why the server cannot read the run's folder (``Permission denied``, ...), or None."""
        try:
            os.scandir(self.root).close()
        except (OSError, ValueError) as exc:
            return f"the server cannot read its folder ({why(exc)})"
        return None

    @classmethod
    def of_checkpoint(cls, checkpoint: str | Path) -> "RunFolder":
        """The run a checkpoint directory ``<run>/checkpoints/<step-dir>`` belongs to."""
        return cls(Path(checkpoint).parent.parent)

    @classmethod
    def locate(cls, source: str | Path) -> tuple["RunFolder", Path]:
        """A run and the checkpoint to continue from, given either the run or one of its checkpoints."""
        checkpoint = resolve_checkpoint(source)
        return cls.of_checkpoint(checkpoint), checkpoint

    @classmethod
    def runs_under(cls, root: str | Path, unreadable: bool = False) -> list["RunFolder"]:
        """Every run folder directly under ``root`` (none when it cannot be read; never raises): its folders as
        ``list_entries`` lists them (a loop, a dangling link, a pipe or a link out of ``root`` is skipped). With
        ``unreadable`` also every folder the server cannot look into (it may be a run: listed as damaged)."""
        found = []
        for entry in list_entries(root, files=False, folders=True):
            try:
                if (entry.path / CHECKPOINTS_DIR).is_dir():
                    found.append(cls(entry.path))
            except (OSError, RuntimeError, ValueError):    # the folder itself cannot be read
                if unreadable:
                    found.append(cls(entry.path))
        return found

    @classmethod
    def create_unique(cls, root: str | Path, name: str) -> "RunFolder":
        """Claim a new folder ``root/name`` (or ``name-2``, ``name-3``, ... when taken); OSError if it cannot."""
        root = make_folder(root)
        for suffix in itertools.count(1):
            path = root / (name if suffix == 1 else f"{name}-{suffix}")
            try:
                with writing(root, f"creating the run folder {path.name}"):
                    path.mkdir()          # atomic: two quick starts never share a folder
                return cls(path)
            except FileExistsError:
                continue
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ checkpoints
    def checkpoints(self) -> list[CheckpointInfo]:
        """The run's complete checkpoints, newest (highest step) first; incomplete ones are skipped.

        What a writer killed mid-save left behind is cleaned up first (``recover_interrupted_writes``):
        its staging directory goes, and a checkpoint it was replacing is put back. Never raises
        (``scan_checkpoints`` also says what could not be read).
        """
        return self.scan_checkpoints().found

    def scan_checkpoints(self) -> CheckpointScan:
        """The run's complete checkpoints (newest first) and what could not be read; never raises. A checkpoint
        whose ``explorer_state.json`` is damaged is listed with ``damage`` set; one whose folder cannot be
        read is left out and named in ``problems``."""
        folder, scan = self.checkpoints_dir, CheckpointScan()
        try:
            recover_interrupted_writes(folder)
        except OSError as exc:                   # a leftover that cannot be cleaned up is not listed anyway
            logger.warning("cannot clean up an interrupted checkpoint write in %s: %s", self.name, why(exc))
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return scan
        except (OSError, ValueError) as exc:
            scan.problems.append(f"its {CHECKPOINTS_DIR} folder cannot be read ({why(exc)})")
            return scan
        for entry in entries:
            match, path = _STEP_DIR.match(entry.name), Path(entry.path)
            if not match or not is_dir(path):
                continue
            try:
                os.scandir(path).close()
            except (OSError, ValueError) as exc:
                scan.problems.append(f"{entry.name} cannot be read ({why(exc)})")
                continue
            if not is_complete(path):
                continue
            info = _checkpoint_info(path, int(match.group(1)))
            info.folder = self
            scan.found.append(info)
        scan.found.sort(key=lambda c: c.step, reverse=True)
        return scan

    def latest(self) -> CheckpointInfo | None:
        """The newest complete checkpoint, or None."""
        found = self.checkpoints()
        return found[0] if found else None

    def prune(self, keep: int | None) -> list[Path]:
        """Delete all but the ``keep`` newest complete checkpoints (``None`` keeps all); returns the deleted."""
        if keep is None:
            return []
        return [info.path for info in self.checkpoints()[keep:] if self.remove_checkpoint(info.path)]

    def remove_checkpoint(self, path: Path) -> bool:
        """Delete the checkpoint folder ``path`` of this run; False when it could not be moved away."""
        # Renamed away first (atomic), so a crash mid-delete never leaves a half checkpoint at a step name.
        doomed = path.with_name(f".{path.name}.del-{work_tag()}")
        try:
            os.rename(path, doomed)
        except OSError:
            return False
        shutil.rmtree(doomed, ignore_errors=True)
        return True


def _checkpoint_info(path: Path, step: int) -> CheckpointInfo:
    """The listing entry of the complete checkpoint ``path`` (its small record and its weights' headers checked;
    damage noted)."""
    record = read_checkpoint_record(path)
    weights = weights_problem(path)
    if isinstance(record, Damaged):
        return CheckpointInfo(path, step, damage=record.reason, weights_damage=weights)
    if record is None:
        return CheckpointInfo(path, step, weights_damage=weights)
    return CheckpointInfo(path, step, record.epoch, record.metrics, record.eval_metrics, record.created,
                          record.total_steps, weights_damage=weights, ends_lean=record.ends_lean)


def resolve_checkpoint(source: str | Path) -> Path:
    """A checkpoint directory from itself or from a run directory (its newest complete one)."""
    source = Path(source)
    if not source.is_dir():
        raise FileNotFoundError(f"no run or checkpoint directory at {source}")
    if is_complete(source):
        return source
    if RunFolder.is_run(source):
        latest = RunFolder(source).latest()
        if latest is None:
            raise FileNotFoundError(f"the run {source} has no complete checkpoint to resume from")
        return latest.path
    if (source / "config.json").exists():
        raise ValueError(f"{source} has no {STATE_FILE}: it is a model, not a complete training checkpoint, "
                         "so training cannot resume from it (it can still be loaded for probing)")
    raise FileNotFoundError(f"{source} is neither a run directory nor a training checkpoint")
