"""Pure figure builders for the run browser: the curves a run's task logs, with the Training and Fine-tune tabs'
own series (names, colours; metric names: ``explorer.runs.legends``), drawn by
``explorer.runs.watch_curves.overlay_figure`` (one or two runs, smoothing, log y, continue markers; downsampled,
hover by step).

A pretraining run (or one whose task is unknown) gets the Training tab's four figures (MLM loss, NSP loss,
accuracy, learning rate); a fine-tuning run the Fine-tune tab's two (loss, the task's metrics) and the learning
rate and gradient norm. A second run is drawn on the first run's figures wherever it logged the same values
(every run logs ``lr`` and ``grad_norm``; a pretraining run's ``loss`` is its total loss). The learning rate is
never smoothed. Plain records in, plotly ``Figure`` s out; no Gradio.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import plotly.graph_objects as go

from engine.training.tasks.registry import TRAINING_TASKS
from explorer.plots import CATEGORY_COLORS
from explorer.runs import plots as tp
from explorer.runs.legends import metric_legends
from explorer.runs.watch_curves import CurveView, FigureSpec, RunCurves, overlay_figure

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
