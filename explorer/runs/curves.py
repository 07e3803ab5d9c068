"""A run's live curves as points, not figures: what a browser is sent on each tick (the Training and Fine-tune tabs).

The charts (the Training tab's four, ``PRETRAINING_CHARTS``: MLM loss, NSP loss, accuracy, learning rate, the series
of ``explorer.runs.plots``; the Fine-tune tab's loss and its task's metrics, ``explorer.finetune.live``) are drawn in
the page by ``assets/curves_view.js`` (the widget: ``explorer.runs.curves_view``). A browser is sent the whole run once (``reset``: the charts' titles and
series, every point, downsampled to ``MAX_POINTS`` per series as the figures are), then only the records that
arrived since its last tick, which the page appends; a tick with no new record sends nothing. The server builds no
figure per tick.

Each training series (but the learning rate, which is exact) carries, beside each step's value (one batch), its
mean over the last ``WINDOW`` logged steps (``running_means``), drawn as the bold line; the status line shows the same means (``latest_means``), so the
number under the Start button is the value the curve ends on. The means read the records a tick has at hand: the
tail ``LOOKBACK`` records before the new ones (``lookback_start``), enough for ``WINDOW`` training steps unless
evaluations outnumber steps in it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.runs.plots import (ACCURACY_SERIES, LR_SERIES, MAX_POINTS, MLM_LOSS_SERIES, NSP_LOSS_SERIES, Series,
                                 downsample)

WINDOW = 20                 # logged steps a running mean covers (the bold line and the status line)
LOOKBACK = 8 * WINDOW       # records before the new ones that a tick reads for the means
STATUS_KEYS = ("mlm_loss", "nsp_acc")     # what the status line shows, as means


@dataclass(frozen=True)
class Chart:
    """One chart: its title, its y axis, its series (``explorer.runs.plots`` ``Series``), a fixed range or None,
    and whether its values read as percentages."""

    title: str
    y_title: str
    series: tuple[Series, ...]
    y_range: tuple[float, float] | None = None
    percent: bool = False
    smoothed: bool = True          # its training series carry running means (not the learning rate: it is exact)
    empty: str = "No steps logged yet"     # what the chart says while it has no point


PRETRAINING_CHARTS = (Chart("MLM loss", "cross-entropy", tuple(MLM_LOSS_SERIES)),
                      Chart("NSP loss", "cross-entropy", tuple(NSP_LOSS_SERIES),
                            empty="No NSP steps logged yet (or NSP is off)"),
                      Chart("Accuracy", "accuracy", tuple(ACCURACY_SERIES), (0.0, 1.0), True),
                      Chart("Learning rate", "lr", tuple(LR_SERIES), smoothed=False))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def series_id(kind: str, key: str) -> str:
    """The name a series' points travel under: ``train:mlm_loss``, ``eval:eval_mlm_loss``."""
    return f"{kind}:{key}"


def _train_rows(records: Sequence[Mapping[str, Any]], key: str,
                window: int) -> list[tuple[int, int, float, float]]:
    """(record index, step, value, running mean) of each training record with a number under ``key``."""
    found: list[tuple[int, int, float, float]] = []
    values: list[float] = []
    for i, r in enumerate(records):
        value, step = r.get(key), r.get("step")
        if r.get("kind") != "train" or not _number(step) or not _number(value):
            continue
        values.append(float(value))
        recent = values[-window:]
        found.append((i, int(step), float(value), sum(recent) / len(recent)))
    return found


def running_means(records: Sequence[Mapping[str, Any]], key: str,
                  window: int = WINDOW) -> list[tuple[int, float, float]]:
    """(step, value, mean of the last ``window`` values up to it) for each training record with a number under
    ``key``, in order."""
    return [(step, value, mean) for _, step, value, mean in _train_rows(records, key, window)]


def latest_means(records: Sequence[Mapping[str, Any]], keys: Sequence[str] = STATUS_KEYS) -> dict[str, float]:
    """Key -> its running mean at the last training record that has it (what the curves end on)."""
    means = {}
    for key in keys:
        found = running_means(records, key)
        if found:
            means[key] = found[-1][2]
    return means


def lookback_start(sent: int) -> int:
    """The record index a tick reads from when the browser has the first ``sent`` records: ``LOOKBACK`` before."""
    return max(0, sent - LOOKBACK)


def chart_specs(charts: Sequence[Chart] = PRETRAINING_CHARTS) -> list[dict[str, Any]]:
    """The charts as the page draws them: titles, axes, what an empty chart says, and each series' id, name,
    colour, dash and kind."""
    return [{"title": c.title, "y_title": c.y_title, "y_range": list(c.y_range) if c.y_range else None,
             "percent": c.percent, "empty": c.empty,
             "series": [{"id": series_id(kind, key), "name": name, "color": color, "dash": dash, "kind": kind}
                        for kind, key, name, color, dash in c.series]} for c in charts]


def _series_keys(charts: Sequence[Chart]) -> list[tuple[str, str, bool]]:
    """(kind, key, whether it carries running means) of every series, once each."""
    return list(dict.fromkeys((kind, key, kind == "train" and c.smoothed) for c in charts for kind, key, *_ in c.series))


def curve_points(records: Sequence[Mapping[str, Any]], first_new: int, run: int | None, next_index: int,
                 reset: bool, max_points: int = MAX_POINTS,
                 charts: Sequence[Chart] = PRETRAINING_CHARTS) -> dict[str, Any]:
    """The value a browser is sent: the points of ``records[first_new:]`` (the records before it are only the
    history the means read), for run ``run``; ``next_index`` is the worker's index after the last record.
    ``reset``: the browser has nothing of this run, so the chart specs come too and each series is downsampled to
    ``max_points``. Smoothed training series: [steps, values, means]; the others: [steps, values]."""
    points: dict[str, list[list[float]]] = {}
    for kind, key, smoothed in _series_keys(charts):
        if smoothed:
            new = [(step, value, mean) for i, step, value, mean in _train_rows(records, key, WINDOW) if i >= first_new]
            if not new:
                continue
            steps, values, means = (list(column) for column in zip(*new))
            if reset and len(steps) > max_points:
                kept, _ = downsample(list(range(len(steps))), values, max_points)
                steps, values, means = ([column[i] for i in kept] for column in (steps, values, means))
            points[series_id(kind, key)] = [steps, values, means]
        else:
            new_records = records[first_new:]
            pairs = [(int(r["step"]), float(r[key])) for r in new_records
                     if r.get("kind") == kind and _number(r.get("step")) and _number(r.get(key))]
            if not pairs:
                continue
            steps, values = (list(column) for column in zip(*pairs))
            if reset:
                steps, values = downsample(steps, values, max_points)
            points[series_id(kind, key)] = [steps, values]
    value: dict[str, Any] = {"kind": "curves", "run": run, "reset": reset, "next": next_index, "points": points,
                             "window": WINDOW}
    if reset:
        value["charts"] = chart_specs(charts)
    return value


def empty_curves(charts: Sequence[Chart]) -> dict[str, Any]:
    """A value that clears the view to ``charts`` with no points (each says its ``empty`` sentence)."""
    return curve_points([], 0, None, 0, reset=True, charts=charts)


def curves_since(worker: Any, run: int | None, seen: Mapping[str, Any],
                 charts: Sequence[Chart] = PRETRAINING_CHARTS,
                 ) -> tuple[dict[str, Any] | None, int, dict[str, float]]:
    """The tick's curves for a browser that was last sent ``seen`` (its ``curves_run`` and ``curves_next``, the
    worker's record index it has points up to): (the points it lacks, or None when it has them all; the index
    they go up to; the running means the status line shows). ``worker.metrics_since(i)`` gives the records from
    index ``i`` and the index after the last; a run that began since is sent from its start."""
    sent = seen.get("curves_next") if seen.get("curves_run") == run else None
    start = 0 if sent is None else lookback_start(sent)
    records, next_index = worker.metrics_since(start)
    if sent is not None and next_index < sent:         # a new run began since: its records from the start
        sent, start = None, 0
        records, next_index = worker.metrics_since(0)
    means = latest_means(records)
    if sent is not None and next_index == sent:
        return None, next_index, means
    value = curve_points(records, 0 if sent is None else sent - start, run, next_index, reset=sent is None,
                         charts=charts)
    return value, next_index, means
