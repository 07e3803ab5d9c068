"""The run browser's reading side: any run in the runs folder, reopened after the fact or followed while a
command-line job (``python -m engine.pretrain`` / ``engine.finetune``, torchrun) writes it, read only, beside the
app's own run; a second run may be drawn over the first one's figures.

``RunWatcher`` (one per app, made by the Training tab) holds the runs being watched, at most ``MAX_WATCHED``
(least recently watched dropped first). Each ``WatchedRun`` follows its ``metrics.jsonl`` with a ``MetricsTail``
into a bounded ``MetricsHistory`` (a tick reads only the bytes appended since the last one; it also finds where
the run was continued, ``MetricsHistory.jumps``) and lists its checkpoints again only when ``change_key`` moves;
every browser watching the same run shares them, and a run is read at most once per ``REFRESH_S`` however many
watch it. A browser keeps in a ``gr.State`` the versions it was last sent and gets ``gr.skip()`` for every
output that did not move. Names, never server paths, reach the client: the runs' names, their checkpoints'
names and their model-picker labels.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from engine.training.runs.metrics_tail import MetricsHistory, MetricsTail, TailRead
from engine.training.runs.run_catalog import RunSummary, change_key, find_run, run_names, run_summaries, summarize
from engine.training.runs.run_folder import CheckpointInfo, RunFolder
from explorer.models.choices import checkpoint_label
from explorer.plots import empty_figure
from explorer.runs.watch.plots import FIGURES, CurveView, RunCurves, browser_figures
from explorer.runs.watch.status import WatchFacts, watch_markdown
from explorer.ui_errors import shown
from explorer.views.export_names import export_info
from explorer.views.plot_names import named

MAX_WATCHED = 4          # runs followed at once (each holds at most MetricsHistory.max_records records)
REFRESH_S = 1.0          # a run's files are read at most this often
NAMES_S = 2.0            # the list of runs is looked at most this often
RELIST_S = 30.0          # a run's checkpoints are listed at least this often, even when no folder time moved
CHECKPOINT_COLUMNS = ["checkpoint", "step", "written", "in the model picker"]
NO_RUN = ("Pick a run above to follow it: any run in the runs folder, also one a command line or a cluster job "
          "is writing right now (`python -m engine.pretrain --run-dir <runs folder>/<name>`).")
WATCH_OUTPUTS = FIGURES + 2  # status, the figures, the checkpoints table

Seen = dict[str, Any]    # output group -> the version last sent to this browser


@dataclass
class WatchedRun:
    """One run being watched: its metrics read so far, its summary and checkpoints, refreshed by ``refresh``."""

    folder: RunFolder
    generation: int                          # new for every WatchedRun: a browser's versions never carry over
    tail: MetricsTail
    history: MetricsHistory = field(default_factory=MetricsHistory)
    summary: RunSummary | None = None
    checkpoints: list[CheckpointInfo] = field(default_factory=list)
    last_read: TailRead = field(default_factory=TailRead)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _key: tuple[float, ...] | None = None
    _read_at: float | None = None
    _listed_at: float = 0.0

    def refresh(self, clock: float) -> None:
        """Read what was appended to the metrics and, when its folder changed, list its checkpoints again; at most
        once per ``REFRESH_S`` of ``clock`` (monotonic seconds)."""
        with self.lock:
            if self._read_at is not None and clock - self._read_at < REFRESH_S:
                return
            self._read_at = clock
            self.last_read = self.tail.read(self.history)
            key = change_key(self.folder)
            if key != self._key or clock - self._listed_at >= RELIST_S or self.summary is None:
                scan = self.folder.scan_checkpoints()
                self.summary, self.checkpoints = summarize(self.folder, scan), scan.found
                self._key, self._listed_at = key, clock

    def facts(self, own_run: bool = False) -> WatchFacts:
        """What the status line says about the run, from the last ``refresh``."""
        assert self.summary is not None, "refresh() first"
        last_write = max((t for t in (self.tail.modified, self.summary.modified) if t), default=None)
        return WatchFacts(self.summary, dict(self.history.latest), last_write, self.history.added,
                          self.history.seen("train"), self.tail.skipped, self.tail.first_problem,
                          self.last_read.problem, own_run)


class RunWatcher:
    """The runs under ``runs_root`` that browsers watch, shared by all of them (thread-safe)."""

    def __init__(self, runs_root: str | Path, max_watched: int = MAX_WATCHED,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runs_root = Path(runs_root)
        self.max_watched, self.clock = max_watched, clock
        self._watched: OrderedDict[str, WatchedRun] = OrderedDict()
        self._generations = itertools.count(1)
        self._names: tuple[float, tuple[str, ...]] | None = None
        self._lock = threading.Lock()

    def names(self) -> tuple[str, ...]:
        """The names of the runs under the runs folder (looked at most once per ``NAMES_S``)."""
        with self._lock:
            if self._names is None or self.clock() - self._names[0] >= NAMES_S:
                self._names = (self.clock(), run_names(self.runs_root, experiments=True))
            return self._names[1]

    def choices(self) -> list[tuple[str, str]]:
        """(label, run name) of every run, newest first; a damaged run's label says what is wrong."""
        return [(shown(s.label), s.name) for s in run_summaries(self.runs_root, experiments=True)]

    def watch(self, name: str) -> WatchedRun:
        """The run called ``name``, refreshed; FileNotFoundError (a sentence) when no run of that name is listed
        (the same answer whatever else is in the runs folder), when it cannot be used, or when it is gone."""
        with self._lock:
            watched = self._watched.get(name)
            if watched is not None and not RunFolder.is_run(watched.folder.root):
                del self._watched[name]
                raise FileNotFoundError(f"the run {name} is gone (its folder was deleted or moved)")
            if watched is None:
                if name not in run_names(self.runs_root, experiments=True):   # one answer for every name not listed
                    raise FileNotFoundError("there is no run of that name in the runs folder (yet); pick one from "
                                            "the list")
                summary = find_run(self.runs_root, name, experiments=True)   # a listed run that cannot be used
                folder = RunFolder(summary.path, name=summary.name, title=summary.title)   # says why
                watched = WatchedRun(folder, next(self._generations), MetricsTail(folder.metrics_path))
                self._watched[name] = watched
            self._watched.move_to_end(name)
            while len(self._watched) > self.max_watched:
                self._watched.popitem(last=False)
        watched.refresh(self.clock())
        return watched


def checkpoint_rows(watched: WatchedRun) -> pd.DataFrame:
    """The run's complete checkpoints, newest first: name, step, when written, its entry in the model picker."""
    rows = [[c.name, c.step, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.written)) if c.written else "",
             shown(checkpoint_label(c))] for c in watched.checkpoints]
    return pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS)


def _cleared(message: str) -> tuple[Any, ...]:
    return (message, *(empty_figure("No run watched") for _ in range(FIGURES)),
            pd.DataFrame([], columns=CHECKPOINT_COLUMNS))


def _curves(watched: WatchedRun) -> RunCurves:
    """A snapshot of ``watched`` 's curves (taken under its lock: another tick may be reading it)."""
    with watched.lock:
        return RunCurves(watched.folder.title, list(watched.history.shown()), tuple(watched.history.jumps))


def _compared(watcher: RunWatcher, compare: str | None, run: str) -> tuple[WatchedRun | None, str]:
    """The run to compare with (None when none is picked, it is the watched run, or it cannot be read) and the
    status line about it."""
    if not compare or compare == run:
        return None, ""
    try:
        other = watcher.watch(compare)
    except FileNotFoundError as exc:
        return None, f"⚠️ compared run: {shown(str(exc))}"
    with other.lock:
        train = other.history.latest.get("train") or {}
        total = other.summary.total_steps if other.summary is not None else None
    steps = f"step {int(train.get('step', 0)):,}" + (f" / {total:,}" if total else "")
    return other, f"Compared with `{shown(other.folder.title)}` ({steps}), drawn over it in its own colour."


def watch_update(watcher: RunWatcher, run: str | None, seen: Seen | None, own_run: str | None = None,
                 with_list: bool = True, compare: str | None = None,
                 view: CurveView = CurveView()) -> tuple[tuple[Any, ...], Seen]:
    """The run browser's outputs (status, figures, checkpoints table, the run list) for a browser last sent
    ``seen`` (None: everything), ``gr.skip()`` where nothing moved; and the new versions. ``compare`` names a
    second run drawn over ``run`` 's figures, ``view`` how the curves are drawn. ``own_run`` is the name of the
    app's own worker run, if any; ``with_list`` False leaves the run list as it is (skipped). Never raises: a
    run that is gone says so in the status."""
    seen = dict(seen or {})
    skip = gr.skip()
    names = watcher.names() if with_list else None
    run_list = gr.Dropdown(choices=watcher.choices()) if with_list and seen.get("runs") != names else skip
    now: Seen = {"runs": names, "run": run or None}
    if seen.get("run") != now["run"]:
        seen = {}
    try:
        watched = watcher.watch(run) if run else None
    except FileNotFoundError as exc:
        watched, message = None, f"⚠️ {shown(str(exc))}"
    else:
        message = NO_RUN
    if watched is None or run is None:
        now["status"] = message
        outputs = _cleared(message) if seen.get("status") != message else (skip,) * WATCH_OUTPUTS
        return (*outputs, run_list), now
    other, line = _compared(watcher, compare, run)
    with watched.lock:
        status = "\n\n".join(filter(None, [watch_markdown(watched.facts(own_run == run), time.time()), line]))
        versions = [watched.generation, *watched.history.version]
        now.update(status=status, checkpoints=(watched.generation,
                                               tuple((c.name, c.damage) for c in watched.checkpoints)))
        task = watched.summary.task if watched.summary is not None else None
        table = checkpoint_rows(watched) if seen.get("checkpoints") != now["checkpoints"] else skip
    if other is not None:
        with other.lock:
            versions += [other.folder.name, other.generation, *other.history.version]
    now["curves"] = (view, *versions)
    figures = ([skip] * FIGURES if seen.get("curves") == now["curves"] else
               browser_figures([_curves(w) for w in (watched, other) if w is not None], task, view))
    info = export_info(f"run {watched.folder.title}", "training curves")    # the charts' export names
    figures = [named(fig, info) for fig in figures]
    return (status if seen.get("status") != status else skip, *figures, table, run_list), now
