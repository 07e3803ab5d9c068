"""An arm measured over its pretraining (BERT, Figure 5): which checkpoints, kept how, and their numbers.

An experiment's ``measure_at`` names fractions of the pretraining steps; ``measured_steps`` turns them into steps
(rounded; snapped to a common checkpoint interval so that at most ``MAX_CHECKPOINTS`` checkpoints are kept), and
``pretraining_changes`` makes the pretraining run save a checkpoint at each of them and keep every one (older
checkpoints keep only the model, not the optimizer state: ``keep_optimizer_state``). After the run ends, each
kept checkpoint is measured the way the arm measures its final model (``evaluation.measure``: fine-tuned into
``<metric>-step-<step>`` beside the final ``<metric>`` run, read back when done); the final step's value is the
final model's own measurement, never a second run.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.experiments.definitions import METRICS, Arm, Experiment, Scale
from engine.experiments.evaluation import measure
from engine.training.runs.run_folder import RunFolder, is_complete

MAX_CHECKPOINTS = 32          # checkpoints a measured pretraining run keeps at most (before its last step)
Series = dict[str, dict[int, float]]     # metric -> pretraining step -> value


def measured_steps(fractions: tuple[float, ...], steps: int) -> dict[float, int]:
    """Each fraction of ``fractions`` (and 1.0, the final model) -> the step measured for it: rounded to a
    multiple of ``checkpoint_interval`` (at least that interval; 1.0 is ``steps`` itself)."""
    interval = checkpoint_interval(fractions, steps)
    found = {1.0: steps}
    for fraction in fractions:
        if fraction < 1.0 and interval is not None:
            found[fraction] = min(steps, max(interval, round(fraction * steps / interval) * interval))
    return dict(sorted(found.items()))


def checkpoint_interval(fractions: tuple[float, ...], steps: int) -> int | None:
    """The steps between the kept checkpoints: the largest that holds every measured step (the greatest common
    divisor of the rounded steps), made coarser when it would keep more than ``MAX_CHECKPOINTS``; None when only
    the final model is measured."""
    rounded = [max(1, round(f * steps)) for f in fractions if f < 1.0]
    if not rounded:
        return None
    interval = math.gcd(*rounded)
    return interval if steps // interval <= MAX_CHECKPOINTS else max(1, steps // MAX_CHECKPOINTS)


def pretraining_changes(experiment: Experiment, arm: Arm, scale: Scale) -> dict[str, Any]:
    """The ``TrainingConfig`` changes that keep the measured checkpoints of ``arm``'s pretraining (none when
    nothing is measured midway)."""
    interval = checkpoint_interval(experiment.measure_at, arm.steps(scale))
    return {} if interval is None else {"checkpoint_every": interval, "keep_last_checkpoints": None}


def measure_series(experiment: Experiment, arm: Arm, scale: Scale, seed: int, run_dir: Path, folder: Path,
                   final: Mapping[str, float | None], check: Callable[[], None],
                   say: Callable[[str], Any] = lambda message: None) -> Series:
    """Every measured checkpoint of the finished run at ``run_dir`` measured by each of the experiment's
    ``measure_metrics`` (``final``: the final model's numbers, reused for the last step); ``check`` is called
    before each measurement (it raises to stop)."""
    if not experiment.measure_at:
        return {}
    series: Series = {}
    run, steps = RunFolder(run_dir), arm.steps(scale)
    for metric in experiment.measure_metrics:
        values: dict[int, float] = {}
        for step in sorted(set(measured_steps(experiment.measure_at, steps).values())):
            if step == steps:
                value = final.get(metric)
            else:
                checkpoint = run.checkpoint_dir(step)
                if not is_complete(checkpoint):
                    raise FileNotFoundError(f"{run_dir} has no checkpoint of step {step} to measure: delete the run "
                                            "folder to pretrain it again with its checkpoints kept")
                check()
                say(f"{experiment.name} · {arm.name} · seed {seed}: {METRICS[metric]} at step {step:,}")
                value = measure(arm, metric, checkpoint, folder / f"{metric}-step-{step}", scale, seed)
            if value is not None:
                values[step] = value
        series[metric] = values
    return series
