"""Pure figure builders for a watched run: the curves its task logs, drawn by the Training and Fine-tune tabs'
own builders (``explorer.training.plots``, ``explorer.finetune.plots``: downsampled, hover by step).

A pretraining run (or one whose task is unknown) gets the Training tab's four figures (MLM loss, NSP loss,
accuracy, learning rate); a fine-tuning run the Fine-tune tab's two (loss, the task's metrics) and the learning
rate and gradient norm. Plain records in, plotly ``Figure`` s out; no Gradio.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from engine.training.tasks.registry import TASKS
from explorer.finetune import plots as fp
from explorer.finetune.tasks import TASKS as FINETUNE_ROWS
from explorer.training import plots as tp

FIGURES = 4              # the watch view's plots, whatever the task
GRAD_NORM_SERIES: list[tp.Series] = [("train", "grad_norm", "gradient norm (before clipping)", "#0f766e", "solid")]


def grad_norm_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    """The gradient norm of every logged step."""
    return tp.curves_figure(records, GRAD_NORM_SERIES, "Gradient norm", "L2 norm")


def run_figures(records: Sequence[Mapping[str, Any]], task: str | None) -> list[go.Figure]:
    """``FIGURES`` figures of ``records`` (a run's ``metrics.jsonl`` records) for a run of ``task``."""
    definition = TASKS.get(task) if task else None
    if definition is None or not definition.finetuning:
        return [tp.mlm_loss_figure(records), tp.nsp_loss_figure(records), tp.accuracy_figure(records),
                tp.lr_figure(records)]
    row = FINETUNE_ROWS.get(definition.name)
    metrics = row.metrics if row is not None else tuple((key, key) for key in definition.metrics)
    return [fp.loss_figure(records, definition.eval_loss), fp.metric_figure(records, metrics),
            tp.lr_figure(records), grad_norm_figure(records)]
