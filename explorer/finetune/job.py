"""The Fine-tune form -> a validated ``JobSpec``, the same spec ``python -m engine.finetune`` makes.

The base model is the picker's key, turned into the folder the engine starts from as ``--init-from``
takes it (``ModelRegistry.folder``: the default model's folder, a checkpoint's, an allowed local folder,
a hub download), of any family the engine reads; before a run starts, its family must have the task's head
and its positions and tokenizer must fit the lengths (``engine.training.tasks.start_model``), each refusal one
sentence. The task's own settings come from their boxes (``explorer.finetune.settings_form``); an empty box takes
the task's row's value (QA's windows for the sequence length) or the setting's default. A bundled example without a
file adds its ``JobSpec`` fields and settings (multiple choice's built-in next-sentence data: ``data=None``,
``corpus``, ``max_documents``, ``num_choices``). Evaluation runs about 8 times a run on at most 10
held-out batches; a checkpoint is written at the last step (and on *Stop* or
*Save checkpoint now*, and after 5 minutes of training), since a checkpoint of the default model with its
optimizer state is ~275 MB. A fine-tune ends lean (``keep_optimizer_state="while-running"``, the engine's default
for a fine-tuning task): once it finishes, its last checkpoint keeps only the model, in the base model's dtype
(``final_dtype="auto"``: the bundled model's float16), so the run folder of a finished fine-tune is 1.04× the 45.8 MB
bundled model's weights; a stopped one keeps what it needs to continue (fp32 and the optimizer state).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from engine.model.families.registry import load_config
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.registry import default_keep_optimizer_state
from engine.training.tasks.start_model import check_start_model, folder_tokenizer
from explorer.finetune.data import MAX_UPLOAD_BYTES, UPLOADS_DIR, chosen_data, parse_labels
from explorer.finetune.settings_form import labels as setting_labels
from explorer.finetune.settings_form import setting_fields, settings_values
from explorer.finetune.tasks import DataCheck, finetune_rows, task_row
from explorer.serving import log_to as log_to
from explorer.serving.gpu import training_device
from explorer.runs.controls import CHECKPOINT_EVERY_S
from explorer.services import Services
from explorer.ui_errors import whole_number

EVALUATIONS = 8              # held-out evaluations per run (and so rows of the "gets wrong" table over time)
EVAL_BATCHES = 10            # held-out batches per evaluation at most


@dataclass(frozen=True)
class FinetuneJob:
    """A spec ready for ``worker.start``, and what the status says about its data."""

    spec: JobSpec
    data_name: str
    data: DataCheck


def number(value: Any, name: str, low: float, high: float, low_open: bool = False) -> float:
    """``value`` as a number in [low, high] (or (low, high] with ``low_open``); ValueError naming the field."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(result) or result > high or result < low or (low_open and result == low):
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")
    return result


def make_job(services: Services, model_key: str | None, task: str, source: str, example: str | None, upload: Any,
             labels: str | None, steps: Any, batch_size: Any, learning_rate: Any, seq_length: Any,
             eval_fraction: Any, report_to: str | None = "none",
             settings: Mapping[str, Any] | None = None) -> FinetuneJob:
    """Check the form and turn it into a validated job; a value left empty ("" or None) takes the task's default;
    ``settings``: the settings boxes' texts by setting name (those of other tasks are ignored). ValueError (gr.Error for a whole-number field) says what is wrong and what to do."""
    row = task_row(task)
    given = dict(steps=steps, batch_size=batch_size, learning_rate=learning_rate, seq_length=seq_length,
                 eval_fraction=eval_fraction)
    value = {k: row.defaults[k] if v is None or str(v).strip() == "" else v for k, v in given.items()}
    total_steps = whole_number(value["steps"], "Steps", 1, 100_000)
    seq = whole_number(value["seq_length"], "Sequence length", 16, services.max_length)
    held_out = number(value["eval_fraction"], "Held-out fraction", 0.0, 0.9)
    training = dict(task=row.name, learning_rate=number(value["learning_rate"], "Learning rate", 0.0, 1.0, True),
                    total_steps=total_steps, batch_size=whole_number(value["batch_size"], "Batch size", 1, 1024),
                    max_seq_length=seq, nsp=False, eval_every=max(1, total_steps // EVALUATIONS),
                    eval_batches=EVAL_BATCHES, checkpoint_every=0, checkpoint_every_s=CHECKPOINT_EVERY_S,
                    warmup_ratio=0.1, keep_optimizer_state=default_keep_optimizer_state(row.name),
                    device=training_device())   # CPU on a Space: a background thread cannot hold a ZeroGPU
    folder = services.registry().folder(model_key or "default")
    data_path, data_name, check, bundled = chosen_data(row, source, example, upload, parse_labels(labels),
                                                       services.get_worker().runs_root / UPLOADS_DIR)
    fields = setting_fields(finetune_rows())
    own = settings_values(fields, row, settings or {}, seq, bundled)
    spec = JobSpec(training, init_from=str(folder), data=None if data_path is None else str(data_path),
                   eval_fraction=held_out, max_file_bytes=MAX_UPLOAD_BYTES,
                   **(bundled.fields if bundled is not None else {}), report_to=log_to.report_to(report_to),
                   task_settings=own)
    config = spec.validate({**setting_labels(fields), "max_seq_length": "Sequence length"})
    model = load_config(Path(folder))
    if seq > model.max_tokens:          # its positions, less those its family skips (RoBERTa's offset)
        raise ValueError(f"Sequence length {seq} is longer than the base model's {model.max_tokens} positions; "
                         f"choose at most {model.max_tokens}.")
    check_start_model(spec, config, model, folder_tokenizer(folder), f"The base model ({model_key or 'default'})")
    return FinetuneJob(spec, data_name, check)
