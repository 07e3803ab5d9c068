"""Pure figure builders for the Fine-tune tab: the loss and the task's metrics over steps, train and held-out.

Plain data in (the worker's metric records, the record keys to draw), a plotly ``Figure`` out; the
curves are the Training tab's (``explorer.runs.plots.curves_figure``: downsampled, hover by step).
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from explorer.plots import CATEGORY_COLORS, empty_figure
from explorer.runs.plots import EVAL_COLOR, TRAIN_COLOR, curves_figure

METRIC_COLORS = CATEGORY_COLORS   # one per metric (cycled); train solid, held-out dotted


def loss_figure(records: Sequence[Mapping[str, Any]], eval_loss: str,
                empty_message: str = "No steps logged yet") -> go.Figure:
    """The training loss of every logged step and the held-out loss (record key ``eval_loss``) of every
    evaluation."""
    series = [("train", "loss", "train", TRAIN_COLOR, "solid"), ("eval", eval_loss, "held-out", EVAL_COLOR, "solid")]
    return curves_figure(records, series, "Loss", "cross-entropy", empty_message=empty_message)


def metric_figure(records: Sequence[Mapping[str, Any]], metrics: Sequence[tuple[str, str]],
                  empty_message: str = "No steps logged yet") -> go.Figure:
    """Each metric ``(key, name)`` on the training batches (``key``) and held out (``eval_<key>``), in [0, 1]."""
    if not metrics:
        return empty_figure(f"Metrics: {empty_message.lower()}")
    series = []
    for (key, name), color in zip(metrics, itertools.cycle(METRIC_COLORS)):
        series += [("train", key, f"{name} (train)", color, "solid"),
                   ("eval", f"eval_{key}", f"{name} (held-out)", color, "dot")]
    return curves_figure(records, series, "Metrics", "fraction right", empty_message=empty_message,
                         y_range=(0.0, 1.0))
