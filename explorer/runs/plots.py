"""Pure figure builders for a run's curves, shared by the Training and Fine-tune tabs and the run browser.

Plain data in (the worker's metric records, or a run's ``metrics.jsonl`` records), a plotly ``Figure`` out:
one line per series, downsampled to ``MAX_POINTS`` (min and max per bucket kept), hover by step. No Gradio and
no tensor math here.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from explorer.plots import empty_figure, figure

TRAIN_COLOR = "#4f6bed"
EVAL_COLOR = "#f28e2b"

# (record kind, key, legend name, colour, dash) for each curve figure.
Series = tuple[str, str, str, str, str]
MLM_LOSS_SERIES: list[Series] = [("train", "mlm_loss", "train", TRAIN_COLOR, "solid"),
                                 ("eval", "eval_mlm_loss", "eval", EVAL_COLOR, "solid")]
NSP_LOSS_SERIES: list[Series] = [("train", "nsp_loss", "train", TRAIN_COLOR, "solid"),
                                 ("eval", "eval_nsp_loss", "eval", EVAL_COLOR, "solid")]
ACCURACY_SERIES: list[Series] = [("train", "mlm_acc", "MLM train", TRAIN_COLOR, "solid"),
                                 ("eval", "eval_mlm_acc", "MLM eval", TRAIN_COLOR, "dot"),
                                 ("train", "nsp_acc", "NSP train", EVAL_COLOR, "solid"),
                                 ("eval", "eval_nsp_acc", "NSP eval", EVAL_COLOR, "dot")]
LR_SERIES: list[Series] = [("train", "lr", "learning rate", "#7c3aed", "solid")]


MAX_POINTS = 1000       # points per curve sent to the browser (a long run is downsampled: ``downsample``)


def _points(records: Sequence[Mapping[str, Any]], kind: str, key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        if r.get("kind") != kind:
            continue
        value, step = r.get(key), r.get("step")
        # Records read from a run's file (a watched run's) may hold anything: a point needs a number.
        if step is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        xs.append(int(step))
        ys.append(float(value))
    return xs, ys


def downsample(xs: Sequence[int], ys: Sequence[float], max_points: int = MAX_POINTS) -> tuple[list[int], list[float]]:
    """At most ``max_points`` of a curve, its shape kept: the first and last points always, and between them
    the lowest and the highest point of each of ``(max_points - 2) // 2`` equal buckets, in step order, so a
    spike or a dip stays visible (min/max decimation). A curve that fits is returned unchanged."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, got {max_points}")
    buckets = (max_points - 2) // 2
    keep = {0, n - 1}
    inner = n - 2
    for b in range(buckets):
        lo, hi = 1 + b * inner // buckets, 1 + (b + 1) * inner // buckets
        if lo >= hi:
            continue
        segment = range(lo, hi)
        keep.add(min(segment, key=ys.__getitem__))
        keep.add(max(segment, key=ys.__getitem__))
    order = sorted(keep)
    return [xs[i] for i in order], [ys[i] for i in order]


def curves_figure(records: Sequence[Mapping[str, Any]], series: Sequence[Series], title: str,
                  y_title: str = "", empty_message: str = "No steps logged yet",
                  y_range: Sequence[float] | None = None, max_points: int = MAX_POINTS,
                  tickformat: str | None = None) -> go.Figure:
    """One line per ``series`` entry that has points (x = step, at most ``max_points`` each); an empty
    figure if none has. Ticks never use SI prefixes or e-notation (a learning rate reads 0.0004, not 400μ)."""
    traces = []
    for kind, key, name, color, dash in series:
        xs, ys = _points(records, kind, key)
        if not xs:
            continue
        xs, ys = downsample(xs, ys, max_points)
        traces.append(dict(
            type="scatter", x=xs, y=ys, name=name,
            mode="lines+markers" if kind == "eval" or len(xs) == 1 else "lines",
            line=dict(color=color, dash=dash, width=2),
            hovertemplate=f"step %{{x}}<br>{name} %{{y:.3g}}<extra></extra>",
        ))
    if not traces:
        return empty_figure(f"{title}: {empty_message.lower()}")
    return figure(
        traces,
        title=dict(text=title),
        height=280,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        xaxis=dict(title=dict(text="step")),
        yaxis=dict(title=dict(text=y_title), range=list(y_range) if y_range is not None else None,
                   exponentformat="none", tickformat=tickformat),
        hovermode="x unified",
    )


def mlm_loss_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    """The masked-LM loss, train and eval."""
    return curves_figure(records, MLM_LOSS_SERIES, "MLM loss", "cross-entropy")


def nsp_loss_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    """The next-sentence loss, train and eval (empty while NSP is off)."""
    return curves_figure(records, NSP_LOSS_SERIES, "NSP loss", "cross-entropy",
                         empty_message="No NSP steps logged yet (or NSP is off)")


def accuracy_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Masked-LM and next-sentence accuracy, train and eval, in [0, 1]."""
    return curves_figure(records, ACCURACY_SERIES, "Accuracy", "accuracy", y_range=(0.0, 1.0), tickformat=".0%")


def lr_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    """The learning rate of every logged step."""
    return curves_figure(records, LR_SERIES, "Learning rate", "lr")
