"""The Fine-tune tab's live view: what every open browser polls, sent only when it changed.

As the Training tab's (``explorer.training.live``; the idle check's key: ``explorer.runs.status.version``): a
browser keeps the versions it was last sent (status; curves: run, records; the wrong-examples table: run, the step
of its predictions) and gets ``gr.skip()`` for every output whose version did not move; the curves are points, the
run once and then only new records' (``explorer.runs.curves``), drawn by the page: no figure is built per tick. A pretraining run (the
Training tab's) is said once: its versions move only with its state, and the tick sleeps (``fine_tuning_version``
is the idle check's key), so a page open on the Training tab pays for one live view, not two. The predictions are made
on the training thread after each evaluation (``engine.training.tasks.eval_examples``), so a tick only reads them.
"""
from __future__ import annotations

import itertools
from typing import Any

import gradio as gr
import pandas as pd

from engine.training.worker.run_state import RunState
from explorer.finetune.mistakes import WRONG_COLUMNS, wrong_note, wrong_rows
from explorer.finetune.status import current_status, is_finetuning
from explorer.finetune.plots import METRIC_COLORS
from explorer.finetune.tasks import FinetuneTask, finetune_rows
from explorer.runs.curves import Chart, curves_since, empty_curves
from explorer.runs.plots import EVAL_COLOR, TRAIN_COLOR
from explorer.runs.status import shown_clock, version
from explorer.services import Services

LIVE_OUTPUTS = 4        # status, the curves (loss and metrics), wrong-examples note, wrong-examples table
Seen = dict[str, Any]


def _versions(services: Services) -> tuple[Any, Seen]:
    st = services.get_worker().status()
    if st.state != RunState.IDLE and not is_finetuning(st):     # the Training tab's run: said once, not per step
        key = (st.run_id, st.state, "another tab's run")
        return st, {"status": key, "curves": key, "examples": key}
    return st, {
        "status": (st.run_id, st.state, st.step, st.total_steps, st.message, st.records, str(st.last_checkpoint),
                   st.error, None if st.tokens_per_s is None else round(st.tokens_per_s, -1), st.examples_step,
                   shown_clock(st)),        # elapsed moves every second: the line is redrawn while it ticks
        "curves": (st.run_id, st.records),
        "examples": (st.run_id, st.state, st.examples_step),
    }


def finetune_charts(row: FinetuneTask) -> tuple[Chart, ...]:
    """The task's two charts: the loss (train and held-out) and each metric on the training batches and held out."""
    metrics = []
    for (key, name), color in zip(row.metrics, itertools.cycle(METRIC_COLORS)):
        metrics += [("train", key, f"{name} (train)", color, "solid"),
                    ("eval", f"eval_{key}", f"{name} (held-out)", color, "dot")]
    return (Chart("Loss", "cross-entropy", (("train", "loss", "train", TRAIN_COLOR, "solid"),
                                            ("eval", row.eval_loss, "held-out", EVAL_COLOR, "solid"))),
            Chart("Metrics", "fraction right", tuple(metrics), (0.0, 1.0), True))


def waiting_charts(message: str) -> tuple[Chart, ...]:
    """The two charts, empty, saying ``message`` (no fine-tuning run to show)."""
    return (Chart("Loss", "cross-entropy", (), empty=f"Loss: {message}"),
            Chart("Metrics", "fraction right", (), empty=f"Metrics: {message}"))


def live_view(services: Services) -> tuple[Any, ...]:
    """Everything the live view shows (the public ``/finetune_status``)."""
    return live_update(services, None)[0]


def live_update(services: Services, seen: Seen | None) -> tuple[tuple[Any, ...], Seen, bool]:
    """The live view's outputs for a browser last sent ``seen`` (None: everything), ``gr.skip()`` where nothing
    changed; the new versions; and whether a run is active (keep ticking)."""
    worker = services.get_worker()
    st, now = _versions(services)
    seen = seen or {}
    changed = {group: seen.get(group) != key for group, key in now.items()}
    skip = gr.skip()
    outputs: list[Any] = [current_status(worker, st) if changed["status"] else skip]
    row = finetune_rows().get(st.task) if is_finetuning(st) else None
    if row is None:
        message = ("no fine-tuning run since the app started" if st.state == RunState.IDLE
                   else "the worker's run is pretraining: see the Training tab")
        outputs.append(empty_curves(waiting_charts(message)) if changed["curves"] else skip)
        now["curves_run"], now["curves_next"] = None, None
    else:   # the run once, then only the points of new records (explorer.runs.curves)
        curves, now["curves_next"], _ = curves_since(worker, st.run_id, seen, finetune_charts(row))
        now["curves_run"] = st.run_id
        outputs.append(curves if curves is not None else skip)
    if changed["examples"]:
        examples = worker.eval_examples() if is_finetuning(st) else None
        outputs += [wrong_note(st, examples), pd.DataFrame(wrong_rows(examples), columns=WRONG_COLUMNS)]
    else:
        outputs += [skip, skip]
    return tuple(outputs), now, st.active and is_finetuning(st)


def fine_tuning_version(services: Services) -> tuple[Any, ...]:
    """What the Fine-tune tab's idle check compares: ``explorer.runs.status.version`` for a fine-tuning run (or
    none); for a pretraining run only its id and state, so its steps do not wake this tab's tick."""
    st = services.get_worker().status()
    if st.state != RunState.IDLE and not is_finetuning(st):
        return (st.run_id, st.state)
    return version(st)
