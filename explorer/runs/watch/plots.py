"""Pure figure builders for the run browser: the curves a run's task logs, one or two runs on the same axes,
smoothed as TensorBoard smooths, on a linear or a log y axis, with the steps where a run was continued marked.

- **Which figures** (``figure_specs``): a pretraining run (or one whose task is unknown) gets the Training tab's
  four figures (MLM loss, NSP loss, accuracy, learning rate); a fine-tuning run the Fine-tune tab's two (loss,
  the task's metrics) and the learning rate and gradient norm, with those tabs' own series (names, colours;
  metric names: ``explorer.runs.legends``). A second run is drawn on the first run's figures wherever it logged
  the same values (every run logs ``lr`` and ``grad_norm``; a pretraining run's ``loss`` is its total loss).
- **One run** is drawn as the Training and Fine-tune tabs draw it (the series' own names and colours).
- **Two runs**: each run has its own colour (``RUN_COLORS``, from ``plotly.colors``) and each series its own dash;
  the legend names the run (``run`` alone when the figure has one series, else ``run · series``).
- **Smoothing** ``w`` in [0, 0.99] is TensorBoard's exponential moving average, debiased:
  ``a_i = w·a_{i-1} + (1-w)·y_i`` from ``a_0 = 0``, drawn as ``a_i / (1 - w^i)`` (so the first point is the first
  value, not pulled toward 0). The raw curve stays behind it, faint (``RAW_OPACITY``) and out of the hover. A
  figure may be drawn unsmoothed whatever ``w``: the learning rate is never smoothed (it is not noisy, and a
  jump must show where it happens).
- **Log y** sets the y axis's type to ``log`` (a fixed range, e.g. accuracy's [0, 1], is dropped there).
- **Continue markers**: a vertical dashed line at each ``LrJump.step`` of a run, in its colour, and a hover
  point on its first curve there saying ``continued at step N: lr X → Y``.

Curves are smoothed over every point, then downsampled (``explorer.runs.plots.downsample``; hover by step).
Plain records in, plotly ``Figure`` s out; no Gradio.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.colors
import plotly.graph_objects as go

from engine.training.runs.metrics_tail import LrJump
from engine.training.tasks.registry import TRAINING_TASKS
from explorer.plots import CATEGORY_COLORS, empty_figure, figure
from explorer.runs import plots as tp
from explorer.runs.legends import metric_legends
from explorer.runs.plots import MAX_POINTS, Series, downsample

RUN_COLORS = (plotly.colors.qualitative.Plotly[0], plotly.colors.qualitative.Plotly[1])   # first run, second run
MARKER_COLOR = "#64748b"                 # a single run's continue markers
DASHES = ("solid", "dot", "dash", "dashdot", "longdash", "longdashdot")   # series by series, two runs
RAW_OPACITY = 0.25
MAX_SMOOTHING = 0.99


@dataclass(frozen=True)
class CurveView:
    """How the curves are drawn: EMA smoothing weight in [0, ``MAX_SMOOTHING``] and a log y axis."""

    smoothing: float = 0.0
    log_y: bool = False

    @classmethod
    def of(cls, smoothing: Any, log_y: Any) -> "CurveView":
        """The view from widget values: a smoothing that is not a number counts as 0, clamped to the range."""
        weight = float(smoothing) if isinstance(smoothing, (int, float)) and not isinstance(smoothing, bool) \
            and math.isfinite(smoothing) else 0.0
        return cls(min(max(weight, 0.0), MAX_SMOOTHING), bool(log_y))


@dataclass(frozen=True)
class RunCurves:
    """One run's records as drawn: its name (the legend's), its records, where it was continued."""

    name: str
    records: Sequence[Mapping[str, Any]]
    jumps: Sequence[LrJump] = field(default_factory=tuple)


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the browser: its series, title, y title, fixed y range, and whether it is smoothed."""

    series: Sequence[Series]
    title: str
    y_title: str = ""
    y_range: tuple[float, float] | None = None
    smooth: bool = True
    empty_message: str = "No steps logged yet"
    tickformat: str | None = None          # as ``curves_figure``'s (accuracy in percent)


def ema(values: Sequence[float], weight: float) -> list[float]:
    """TensorBoard's debiased exponential moving average of ``values`` with ``weight`` (0: the values)."""
    if weight <= 0:
        return list(values)
    out, last = [], 0.0
    for i, value in enumerate(values, start=1):
        last = weight * last + (1 - weight) * value
        out.append(last / (1 - weight ** i))
    return out


def lr_text(value: float) -> str:
    """A learning rate to 3 significant digits, never in e-notation: 5e-05 -> "0.00005", 0.00025 -> "0.00025"."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def points(records: Sequence[Mapping[str, Any]], kind: str, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of ``key`` in the records of ``kind``; values that are not finite numbers left out."""
    xs, ys = [], []
    for r in records:
        value, step = r.get(key), r.get("step")
        if r.get("kind") != kind or not isinstance(step, int) or isinstance(value, bool) \
                or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        xs.append(step)
        ys.append(float(value))
    return xs, ys


def _run_traces(spec: FigureSpec, run: RunCurves, color: str | None, runs: int,
                view: CurveView) -> list[dict[str, Any]]:
    """The traces of one run on one figure: per series with points, the faint raw curve (when smoothed) and
    the curve."""
    weight = view.smoothing if spec.smooth else 0.0
    traces = []
    for index, s in enumerate(spec.series):
        kind, key, name, own_color, dash = s
        xs, ys = points(run.records, kind, key)
        if not xs:
            continue
        if runs > 1:
            name = run.name if len(spec.series) == 1 else f"{run.name} · {name}"
            own_color, dash = color or own_color, DASHES[index % len(DASHES)]
        mode = "lines+markers" if kind == "eval" or len(xs) == 1 else "lines"
        if weight > 0:
            raw_x, raw_y = downsample(xs, ys, MAX_POINTS)
            traces.append(dict(type="scatter", x=raw_x, y=raw_y, name=f"{name} (raw)", mode=mode,
                               line=dict(color=own_color, dash=dash, width=1), opacity=RAW_OPACITY,
                               showlegend=False, hoverinfo="skip", legendgroup=name))
        sx, sy = downsample(xs, ema(ys, weight), MAX_POINTS)
        smoothed = " (smoothed)" if weight > 0 else ""
        traces.append(dict(type="scatter", x=sx, y=sy, name=name, mode=mode,
                           line=dict(color=own_color, dash=dash, width=2),
                           hovertemplate=f"step %{{x}}<br>{name}{smoothed} %{{y:.3g}}<extra></extra>",
                           **(dict(legendgroup=name) if weight > 0 else {})))   # one legend entry hides both
    return traces


def _markers(run: RunCurves, traces: Sequence[Mapping[str, Any]], color: str) -> tuple[list[dict], list[dict]]:
    """(shapes, hover traces) marking where ``run`` was continued, on its first curve of the figure."""
    curve = next((t for t in traces if t.get("hoverinfo") != "skip"), None)
    if curve is None:
        return [], []
    shapes, hovers = [], []
    for jump in run.jumps:
        shapes.append(dict(type="line", xref="x", yref="paper", x0=jump.step, x1=jump.step, y0=0, y1=1,
                           line=dict(color=color, dash="dash", width=1.5)))
        before = [y for x, y in zip(curve["x"], curve["y"]) if x <= jump.step]
        y = before[-1] if before else curve["y"][0]
        text = f"continued at step {jump.step:,}: lr {lr_text(jump.lr_before)} → {lr_text(jump.lr_after)}"
        hovers.append(dict(type="scatter", x=[jump.step], y=[y], mode="markers", showlegend=False,
                           name=f"{run.name}: continued", marker=dict(symbol="line-ns-open", size=16, color=color),
                           hovertemplate=f"{text}<extra></extra>"))
    return shapes, hovers


def overlay_figure(runs: Sequence[RunCurves], spec: FigureSpec, view: CurveView = CurveView()) -> go.Figure:
    """``spec`` 's curves of one or two ``runs`` on the same axes, drawn as ``view`` says, each run's continues
    marked; an empty figure when no run has a point."""
    traces, shapes = [], []
    for number, run in enumerate(runs):
        color = RUN_COLORS[number % len(RUN_COLORS)] if len(runs) > 1 else None
        own = _run_traces(spec, run, color, len(runs), view)
        marks, hovers = _markers(run, own, color or MARKER_COLOR)
        traces += own + hovers
        shapes += marks
    if not traces:
        return empty_figure(f"{spec.title}: {spec.empty_message.lower()}")
    yaxis: dict[str, Any] = dict(title=dict(text=spec.y_title), exponentformat="none", tickformat=spec.tickformat)
    if view.log_y:
        yaxis["type"] = "log"
    elif spec.y_range is not None:
        yaxis["range"] = list(spec.y_range)
    return figure(traces, title=dict(text=spec.title), height=280, margin=dict(l=50, r=20, t=50, b=40),
                  legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
                  xaxis=dict(title=dict(text="step")), yaxis=yaxis, hovermode="x unified", shapes=shapes)


# --- which figures a run gets ------------------------------------------------------------------

FIGURES = 4              # the browser's plots, whatever the task
GRAD_NORM_SERIES: list[tp.Series] = [("train", "grad_norm", "gradient norm (before clipping)", "#0f766e", "solid")]
LR = FigureSpec(tp.LR_SERIES, "Learning rate", "lr", smooth=False)
PRETRAINING = (FigureSpec(tp.MLM_LOSS_SERIES, "MLM loss", "cross-entropy"),
               FigureSpec(tp.NSP_LOSS_SERIES, "NSP loss", "cross-entropy",
                          empty_message="No NSP steps logged yet (or NSP is off)"),
               FigureSpec(tp.ACCURACY_SERIES, "Accuracy", "accuracy", y_range=(0.0, 1.0), tickformat=".0%"), LR)


def finetuning_specs(task: str) -> tuple[FigureSpec, ...]:
    """A fine-tuning task's figures: loss (train, held-out), its metrics in [0, 1], learning rate, gradient
    norm (the Fine-tune tab's series)."""
    definition = TRAINING_TASKS[task]
    metrics = metric_legends(definition)
    loss = [("train", "loss", "train", tp.TRAIN_COLOR, "solid"),
            ("eval", definition.eval_loss, "held-out", tp.EVAL_COLOR, "solid")]
    series: list[tp.Series] = []
    for (key, name), color in zip(metrics, itertools.cycle(CATEGORY_COLORS)):
        series += [("train", key, f"{name} (train)", color, "solid"),
                   ("eval", f"eval_{key}", f"{name} (held-out)", color, "dot")]
    return (FigureSpec(loss, "Loss", "cross-entropy"),
            FigureSpec(series, "Metrics", "fraction right", y_range=(0.0, 1.0)), LR,
            FigureSpec(GRAD_NORM_SERIES, "Gradient norm", "L2 norm"))


def figure_specs(task: str | None) -> tuple[FigureSpec, ...]:
    """The ``FIGURES`` figures for a run of ``task`` (pretraining's when it is unknown)."""
    definition = TRAINING_TASKS.get(task) if task else None
    if definition is None or not definition.finetuning:
        return PRETRAINING
    return finetuning_specs(definition.name)


def browser_figures(runs: Sequence[RunCurves], task: str | None, view: CurveView = CurveView()) -> list[go.Figure]:
    """The ``FIGURES`` figures of ``runs`` (one or two; the first run's task, ``task``, picks the figures)."""
    return [overlay_figure(runs, spec, view) for spec in figure_specs(task)]
