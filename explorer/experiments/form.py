"""The Experiments form -> an ``ExperimentJob``: the experiment (one of ``EXPERIMENTS``), quick or default scale,
seeds and steps, each checked with a sentence (``gr.Error``) before anything starts; and what the form shows about
the chosen experiment (its title, source, the factor its arms differ in, its arms and its scales). The experiments
are read from ``builtin.EXPERIMENTS`` when the tab is built and on each Start (so one added there is offered)."""
from __future__ import annotations

from typing import Any

import gradio as gr

from engine.experiments import builtin
from engine.experiments.definitions import Experiment, Scale
from explorer.experiments.background import ExperimentJob
from explorer.ui_errors import whole_number

SCALES = ("quick", "default")
MAX_SEEDS = 10
MAX_STEPS = 100_000


def experiment_choices() -> list[tuple[str, str]]:
    """The dropdown's (label, name) pairs, one per built-in experiment, in their order."""
    return [(f"{e.name}: {e.title}", e.name) for e in builtin.EXPERIMENTS.values()]


def chosen_experiment(name: Any) -> Experiment:
    """The experiment called ``name``; ``gr.Error`` naming those there are."""
    found = builtin.EXPERIMENTS.get(name) if isinstance(name, str) else None
    if found is None:
        raise gr.Error(f"There is no experiment {name!r}; choose one of: {', '.join(builtin.EXPERIMENTS)}.",
                       print_exception=False)
    return found


def _scale_text(scale: Scale) -> str:
    return (f"{scale.preset} preset, {scale.steps:,} steps of {scale.batch_size} × {scale.seq_length} tokens, "
            f"{scale.seeds} seed(s), the first {scale.max_documents} documents")


def _measured_text(e: Experiment) -> str:
    """The line saying at which checkpoints the arms are also measured ("" when only their final models are)."""
    if not e.measure_at:
        return ""
    return (f"Also measured at {', '.join(f'{round(100 * f)}%' for f in e.measure_at)} of the pretraining steps "
            "(each checkpoint fine-tuned the same way)  \n")


def describe(name: Any) -> str:
    """Markdown about the experiment called ``name``: title, source, factor, arms and both scales."""
    try:
        e = chosen_experiment(name)
    except gr.Error:
        return f"There is no experiment {name!r}."
    arms = ", ".join(f"`{arm.name}` ({arm.label}"
                     + (f"; its batch grows to `{arm.tokens_like}`'s tokens per step" if arm.tokens_like else "") + ")"
                     for arm in e.arms)
    return (f"**{e.title}**  \nSource: {e.source}  \nWhat differs between the arms: {e.factor}  \n"
            f"Arms ({len(e.arms)}): {arms}  \n{_measured_text(e)}Quick scale: {_scale_text(e.quick)}  \n"
            f"Default scale: {_scale_text(e.full)}")


def _empty(value: Any) -> bool:
    """None, blank text or 0: the field keeps the scale's value (a browser sends an emptied number box as 0)."""
    if isinstance(value, bool):
        return False
    return value is None or (isinstance(value, str) and value.strip() in ("", "0")) or (
        isinstance(value, (int, float)) and value == 0)


def make_job(name: Any, scale_name: Any, seeds: Any = None, steps: Any = None) -> ExperimentJob:
    """Check the form and turn it into the job to start (``gr.Error`` with a sentence on bad input): ``seeds``
    or ``steps`` left empty (or 0) keep the scale's."""
    experiment = chosen_experiment(name)
    if scale_name not in SCALES:
        raise gr.Error(f"Scale must be one of {', '.join(SCALES)}, got {scale_name!r}.", print_exception=False)
    changes: dict[str, int] = {}
    if not _empty(seeds):
        changes["seeds"] = whole_number(seeds, "Seeds", 1, MAX_SEEDS)
    if not _empty(steps):
        changes["steps"] = whole_number(steps, "Steps", 1, MAX_STEPS)
    return ExperimentJob(experiment, experiment.scale(scale_name == "quick", **changes))
