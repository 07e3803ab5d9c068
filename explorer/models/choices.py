"""What the model picker lists, one entry at a time: a ``ModelChoice`` (its label shown, its key passed around), a
checkpoint's key and label, and the few checkpoints the over-training views pick. Plain values, no state (the
``ModelRegistry`` of ``explorer.models.registry`` lists them) and no Gradio.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.checks import is_finite_number
from engine.training.runs.run_folder import CheckpointInfo, RunFolder
from explorer.models.keys import ModelKey


@dataclass(frozen=True)
class ModelChoice:
    """One entry of the model picker: ``label`` is shown, ``key`` is passed around."""

    key: str
    label: str
    kind: str                       # "default" | "live" | "checkpoint" | "local" | "hub"
    step: int | None = None         # training step, for checkpoints
    run: str = ""                   # the run's name, for checkpoints


def evenly_spaced(choices: list[ModelChoice], limit: int = 6) -> list[ModelChoice]:
    """At most ``limit`` of ``choices``, evenly spaced, always the first and the last (over-training views)."""
    if len(choices) <= limit:
        return list(choices)
    picks = {round(j * (len(choices) - 1) / max(1, limit - 1)) for j in range(limit)}
    return [choices[-1]] if limit <= 1 else [choices[i] for i in sorted(picks)]


def checkpoint_key(path: Path) -> str:
    """The key of a checkpoint directory ``<run>/checkpoints/<step-dir>``."""
    return ModelKey.checkpoint(RunFolder.of_checkpoint(path).name, path.name).text


def checkpoint_label(info: CheckpointInfo) -> str:
    """"run · step 300 · held-out loss 3.21" (the evaluation at its step: comparable between checkpoints), else
    "run · step 300 · batch loss 3.45" (the last logged step's one batch, said so: a lucky batch would make an
    early checkpoint look better than a later one), else no loss; a checkpoint whose small record is damaged says
    so: "run · step 300 · ⚠ explorer_state.json: ... (the weights may still load)"."""
    run = info.run.title                      # an experiment's run: "bert-table8 · mix-100-0-0 · seed 1 · ..."
    if info.damage:
        return f"{run} · step {info.step} · ⚠ {info.damage} (the weights may still load)"
    held_out = info.eval_metrics if isinstance(info.eval_metrics, dict) else {}
    metrics = info.metrics if isinstance(info.metrics, dict) else {}
    evaluated = held_out.get("eval_mlm_loss", held_out.get("eval_loss"))
    batch = metrics.get("mlm_loss", metrics.get("loss"))
    if is_finite_number(evaluated):
        loss_text = f" · held-out loss {evaluated:.3f}"
    else:
        loss_text = f" · batch loss {batch:.3f}" if is_finite_number(batch) else ""
    return f"{run} · step {info.step}{loss_text}"


def checkpoint_choice(info: CheckpointInfo) -> ModelChoice:
    """A checkpoint's entry in the picker."""
    run = info.run.name                       # as listed: an experiment's run keeps its name (experiments:...)
    return ModelChoice(ModelKey.checkpoint(run, info.path.name).text, checkpoint_label(info), "checkpoint", info.step,
                       run)
