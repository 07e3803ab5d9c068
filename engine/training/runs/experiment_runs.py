"""The runs an experiment wrote (``python -m engine.experiment``, the Experiments tab), listed beside the ordinary
runs of a runs folder: a bounded, typed walk of the experiments folder's known layout, never a walk of any depth.

The layout (``engine.experiments.runner`` writes it)::

    <runs>/experiments/<experiment>/<scale>/<arm>/seed-<k>/<run>/    pretrain, and one fine-tune per measure

A run there gets a flat *name* that can stand wherever a direct run's folder name stands (a ``checkpoint:<run>/<step>``
key, the run browser's choice, ``find_run``): ``experiments:<experiment>:<scale>:<arm>:seed-<k>:<run>``, and a
*title* a person recognises, ``bert-table8 · mix-100-0-0 · seed 1 · tiny 600 steps`` (``· pos_acc`` for a fine-tune).

The walk follows ``folder_listing.list_entries``'s rules at every level (hidden names skipped, loops and dangling
links skipped, links never leave the runs folder) and these limits: the ``MAX_EXPERIMENTS`` most recently changed
experiment folders, at most ``MAX_ENTRIES`` folders looked at in any one folder, at most ``MAX_RUNS`` runs in all;
only ``seed-<k>`` folders at the seed level; a folder whose name holds ``:`` is left out (its name would be
ambiguous). A folder of the layout the server cannot read is listed (with ``unreadable``) under its partial name,
so a person sees it as damaged. Never raises.

``checkpoints_of(run)`` lists an experiment run's checkpoints again only when a time in its checkpoints folder moved
(the folder's, each step folder's, their weights' and small records'): a finished arm is read once, not at every
listing of the model picker (measured with 50 experiment folders, the cap of 240 runs of 2 checkpoints each, on 2
CPU cores: 0.2 s listed afresh, 0.05–0.1 s kept; the names alone 0.03–0.06 s).
"""
from __future__ import annotations

import logging
import os
import re
import stat
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from engine.folder_listing import list_entries
from engine.training.runs.run_folder import CHECKPOINTS_DIR, CheckpointInfo, RunFolder

logger = logging.getLogger(__name__)

EXPERIMENTS_DIR = "experiments"      # under the runs folder (``engine.experiment``'s and the app's default)
SEPARATOR = ":"
PREFIX = EXPERIMENTS_DIR + SEPARATOR
PRETRAIN_RUN = "pretrain"            # the arm's own run; the other runs of a seed are its fine-tunes
MAX_EXPERIMENTS = 24                 # experiment folders listed (the most recently changed first)
MAX_ENTRIES = 64                     # folders looked at in any one folder of the layout
MAX_RUNS = 240                       # runs listed from the experiments folder in all
_SCANS: dict[Path, tuple[tuple, list[CheckpointInfo]]] = {}     # run folder -> (its times, its checkpoints)
_SCANS_LOCK = threading.Lock()
LEVELS = ("experiment", "scale", "arm", "seed", "run")
_SEED = re.compile(r"^seed-(\d{1,9})$")
_SCALE = re.compile(r"^(.+)-(\d+)-steps-[0-9a-f]{8}$")


@dataclass(frozen=True)
class ExperimentRunName:
    """Where in the layout a run (or, for a folder that cannot be read, a folder) of an experiment is: its folder
    names from the experiment down, one to five of them."""

    parts: tuple[str, ...]

    @property
    def name(self) -> str:
        """``experiments:<experiment>:<scale>:<arm>:seed-<k>:<run>`` (fewer parts for a folder above a run)."""
        return PREFIX + SEPARATOR.join(self.parts)

    @property
    def title(self) -> str:
        """``bert-table8 · mix-100-0-0 · seed 1 · tiny 600 steps``; a fine-tune adds its folder's name."""
        named = dict(zip(LEVELS, self.parts))
        words = [named["experiment"]]
        if "arm" in named:
            words.append(named["arm"])
        if "seed" in named:
            words.append(named["seed"].replace("-", " ", 1))
        if named.get("run", PRETRAIN_RUN) != PRETRAIN_RUN:
            words.append(f"{named['run']} fine-tune")
        if "scale" in named:
            scale = _SCALE.match(named["scale"])
            words.append(f"{scale.group(1)} {scale.group(2)} steps" if scale else named["scale"])
        return " · ".join(words)

    def path(self, root: str | Path) -> Path:
        """Its folder under the runs folder ``root`` (not checked: ``locate`` checks)."""
        return Path(root, EXPERIMENTS_DIR, *self.parts)

    def folder(self, root: str | Path) -> RunFolder:
        """Its ``RunFolder``, named and titled."""
        return RunFolder(self.path(root), name=self.name, title=self.title)

    @classmethod
    def parse(cls, name: str) -> "ExperimentRunName | None":
        """The parts of ``name`` when it is an experiment run's name (each part a plain folder name: no separator,
        no ``.``/``..``, no control characters; a seed part ``seed-<k>``), else None."""
        if not isinstance(name, str) or not name.startswith(PREFIX) or len(name) > 1024:
            return None
        parts = tuple(name[len(PREFIX):].split(SEPARATOR))
        if not 1 <= len(parts) <= len(LEVELS) or not all(_plain(part) for part in parts):
            return None
        if len(parts) >= 4 and not _SEED.match(parts[3]):
            return None
        return cls(parts)


def _plain(part: str) -> bool:
    return (bool(part) and part not in (".", "..") and not part.startswith(".") and "/" not in part
            and "\\" not in part and SEPARATOR not in part and not any(ord(c) < 32 or ord(c) == 127 for c in part))


def experiment_runs(root: str | Path, unreadable: bool = False) -> list[RunFolder]:
    """Every run under ``root``'s experiments folder, named and titled (rules and limits in the module docstring);
    with ``unreadable`` also every folder of the layout the server cannot look into. Never raises."""
    within = _resolved(Path(root))
    if not within:
        return []
    found: list[RunFolder] = []
    experiments = _folders(Path(root) / EXPERIMENTS_DIR, within, newest_first=True)[:MAX_EXPERIMENTS]
    for experiment in experiments:
        _walk(Path(root), (experiment,), within, unreadable, found)
        if len(found) >= MAX_RUNS:
            logger.info("the experiments folder holds more than %d runs; the first %d are listed", MAX_RUNS, MAX_RUNS)
            break
    return found[:MAX_RUNS]


def _walk(root: Path, parts: tuple[str, ...], within: tuple[Path, ...], unreadable: bool,
          found: list[RunFolder]) -> None:
    """List the runs in the layout's folder ``parts`` (recursion is bounded by the layout's five levels)."""
    place = ExperimentRunName(parts)
    path = place.path(root)
    if len(parts) == len(LEVELS):
        try:
            if stat.S_ISDIR(os.stat(path / CHECKPOINTS_DIR).st_mode):
                found.append(place.folder(root))
        except (FileNotFoundError, NotADirectoryError):      # not (yet) a run: nothing to list
            pass
        except (OSError, ValueError):                        # the run's folder itself cannot be read
            if unreadable:
                found.append(place.folder(root))
        return
    try:
        os.scandir(path).close()
    except (OSError, ValueError):
        if unreadable:
            found.append(place.folder(root))                 # a person sees it listed as damaged
        return
    children = _folders(path, within)
    if len(parts) == 3:                                      # an arm's folder: its seeds
        children = [name for name in children if _SEED.match(name)]
    for child in children[:MAX_ENTRIES]:
        if len(found) >= MAX_RUNS:
            return
        _walk(root, (*parts, child), within, unreadable, found)


def _folders(path: Path, within: tuple[Path, ...], newest_first: bool = False) -> list[str]:
    """The names of ``path``'s usable folders (``list_entries``' rules, links kept inside ``within``), by name or
    newest first; names holding the separator are left out."""
    try:
        os.scandir(path).close()
    except (OSError, ValueError):                            # missing or unreadable: nothing (and no warning)
        return []
    entries = [e for e in list_entries(path, files=False, folders=True, within=within) if _plain(e.name)]
    if newest_first:
        entries.sort(key=lambda e: _mtime(e.target), reverse=True)
    return [e.name for e in entries]


def locate(root: str | Path, name: str) -> RunFolder | None:
    """The run (or layout folder) called ``name`` under the runs folder ``root``: a direct run's folder, or an
    experiment run's (inside ``root`` once every link is followed); None for a name that is neither."""
    if not name or "/" in name or os.sep in name or name in (".", ".."):     # one folder name (a \\ is one on POSIX)
        return None
    direct = Path(root) / name
    place = ExperimentRunName.parse(name)
    if place is None or RunFolder.is_run(direct):
        return RunFolder(direct)
    within = _resolved(Path(root))
    try:
        target = Path(os.path.realpath(place.path(root)))
    except (OSError, RuntimeError, ValueError):
        return None
    if not any(target == r or r in target.parents for r in within):
        return None                                          # a link out of the runs folder
    return place.folder(root)


def listed_runs(root: str | Path, unreadable: bool = False, experiments: bool = False) -> list[RunFolder]:
    """The runs directly under ``root`` (``RunFolder.runs_under``), then, with ``experiments``, the experiments'."""
    direct = RunFolder.runs_under(root, unreadable=unreadable)
    return direct + experiment_runs(root, unreadable) if experiments else direct


def _resolved(root: Path) -> tuple[Path, ...]:
    try:
        return (Path(os.path.realpath(root, strict=True)),)
    except (OSError, RuntimeError, ValueError):
        return ()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except (OSError, ValueError):
        return 0.0


def checkpoints_of(run: RunFolder) -> list[CheckpointInfo]:
    """``run.checkpoints()``, kept while no time in its checkpoints folder moves (see the module); never raises."""
    key = _times(run.checkpoints_dir)
    with _SCANS_LOCK:
        kept = _SCANS.get(run.root)
    if key is not None and kept is not None and kept[0] == key:
        return [replace(info, folder=run) for info in kept[1]]
    found = run.checkpoints()
    if key is not None:
        with _SCANS_LOCK:
            if len(_SCANS) >= 4 * MAX_RUNS:
                _SCANS.clear()
            _SCANS[run.root] = (key, found)
    return found


def _times(folder: Path) -> tuple | None:
    """The modification times (ns) of ``folder``, each entry in it and the files a listing reads in each; None
    where one cannot be read (then nothing is kept)."""
    try:
        times: list = [os.stat(folder).st_mtime_ns]
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                times.append((entry.name, entry.stat().st_mtime_ns))
                for name in ("model.safetensors", "explorer_state.json", "training_state.pt"):
                    try:
                        info = os.stat(os.path.join(entry.path, name))
                        times.append((info.st_mtime_ns, info.st_size))
                    except (FileNotFoundError, NotADirectoryError):
                        times.append(None)
        return tuple(times)
    except (OSError, ValueError):
        return None


def is_experiment_run(run: RunFolder) -> bool:
    """Whether ``run`` was listed from the experiments folder (its name is an experiment run's)."""
    return run.name.startswith(PREFIX) and run.name != run.root.name
