"""The "Log to" choice of the Training and Fine-tune forms: the run's ``report_to`` (``engine.training.loop.report_to``).

``none`` keeps the curves in the run's ``metrics.jsonl`` (what the tabs draw); ``TensorBoard`` also writes
event files to ``<run>/logs/`` for ``tensorboard --logdir <runs folder>``. It needs the optional
``tensorboard`` package; without it, *Start* says which package to install. trackio is not offered
(see ``engine.training.loop.report_to``).
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from engine.training.loop.report_to import REPORT_TO

CHOICES = [("none", "none"), ("TensorBoard", "tensorboard")]          # (label, report_to)
INFO = "TensorBoard: event files in <run>/logs (needs the tensorboard package)"


def dropdown(**options: Any) -> gr.Dropdown:
    """The "Log to" dropdown, ``none`` first and chosen; ``options`` go to ``gr.Dropdown`` (``info=None``: no note)."""
    return gr.Dropdown(CHOICES, value="none", label="Log to", **{"info": INFO, **options})


def report_to(value: str | None) -> str:
    """The form's value as a ``JobSpec.report_to`` (empty: ``none``); ValueError names the choices."""
    value = (value or "none").strip().lower()
    if value not in REPORT_TO:
        raise ValueError(f"Log to must be one of: {', '.join(label for label, _ in CHOICES)}; got {value!r}")
    return value
