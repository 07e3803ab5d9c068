"""The Training form -> a validated ``JobSpec`` (task ``pretraining``, as ``python -m engine.pretrain`` makes one
from its flags), and a run started with it on the app's one worker. The controls' values are checked here (a
``ValueError`` says what is wrong), given text is read and checked (format, size, documents for NSP) before a run
starts, the eval and checkpoint intervals follow the step count, and the device is ``gpu.training_device()`` (CPU
on a Space)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gradio as gr

from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.errors import RunActiveError
from explorer.runs.controls import CHECKPOINT_EVERY_S
from explorer.runs.status import status_markdown
from explorer.serving import log_to as log_to
from explorer.serving.gpu import training_device
from explorer.services import Services
from explorer.training import objective
from explorer.training.text_source import check_given_text, text_fields, vocabulary_fields
from explorer.ui_errors import whole_number

PRESETS = ["tiny", "mini", "small"]


def _float(value: Any, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def make_spec(services: Services, preset: str, corpus: str, max_documents: Any, vocab_size: Any,
              seq_length: Any, batch_size: Any, learning_rate: Any, steps: Any, mask_rate: Any,
              whole_word: bool, nsp: bool, source: str = "builtin", text: str | None = "", text_file: Any = None,
              vocabulary: str = "train", report_to: str | None = "none",
              task_settings: Mapping[str, Any] | None = None) -> JobSpec:
    """Check the controls and turn them into a validated ``JobSpec`` (ValueError says what is wrong); given
    text is read and checked here (format, size, documents for NSP), before a run starts. ``task_settings``: the
    *Objective* section's (``explorer.training.objective``), checked with NSP and whole-word masking here."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    documents = whole_number(max_documents, "Max documents", 1, 1_000_000)
    words = vocabulary_fields(vocabulary, whole_number(vocab_size, "Vocab size", 50, 200_000))
    fields = text_fields(source, corpus, text, text_file)
    total_steps = whole_number(steps, "Steps", 1, 1_000_000)
    training = dict(
        learning_rate=_float(learning_rate, "Learning rate"),
        total_steps=total_steps,
        batch_size=whole_number(batch_size, "Batch size", 1, 4096),
        max_seq_length=whole_number(seq_length, "Sequence length", 8, min(512, services.max_length)),
        mlm_probability=_float(mask_rate, "Masking rate"),
        whole_word_masking=bool(whole_word),
        nsp=bool(nsp),
        eval_every=max(1, total_steps // 10),
        eval_batches=5,
        checkpoint_every=max(50, total_steps // 4),  # the last step is always checkpointed too
        checkpoint_every_s=CHECKPOINT_EVERY_S,
        device=training_device(),  # CPU on a Space: a background thread cannot hold a ZeroGPU
    )
    spec = JobSpec(training, preset=preset, max_documents=documents, report_to=log_to.report_to(report_to),
                   task_settings=dict(task_settings or {}), **fields, **words)
    try:
        spec.validate(names=objective.LABELS)
    except ValueError as exc:                     # the settings' rules, in the form's words (clm with NSP on, ...)
        raise ValueError(objective.reworded(str(exc))) from None
    check_given_text(fields, documents, bool(nsp))
    return spec


def start_run(services: Services, *controls: Any, task_settings: Mapping[str, Any] | None = None) -> str:
    """Start a run; a warning (not an error) when one is already active."""
    worker = services.get_worker()
    experiment = services.experiment_busy()          # an experiment trains (the Experiments tab): one at a time
    if experiment:
        gr.Warning(experiment)
        return f"⚠️ {experiment}\n\n" + status_markdown(worker.status())
    spec = make_spec(services, *controls, task_settings=task_settings)
    try:
        worker.start(spec)
    except RunActiveError as e:
        gr.Warning(str(e))
        return f"⚠️ {e}\n\n" + status_markdown(worker.status())
    return status_markdown(worker.status())
