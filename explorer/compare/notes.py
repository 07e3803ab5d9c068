"""What the Compare tab says beside the fill-mask comparison when a model's masked-LM head was not trained.

A checkpoint of a fine-tuning run (its run's ``run.json`` names a fine-tuning task, e.g. token classification)
keeps the masked-LM head of the model it started from, but fine-tuning trains only the task's head and the
encoder under it: the old MLM head then reads an encoder that has moved, and its fill-mask guesses collapse.
Only what the run records is read (``spec_file.spec_record``); a model from a plain folder or the hub gets no note.
"""
from __future__ import annotations

from engine.model.loaded_model import LoadedModel
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import spec_record
from engine.training.runs.records import RunRecord
from engine.training.tasks.registry import is_finetuning, task_definition
from explorer.glossary import gloss


def finetuned_task(loaded: LoadedModel) -> str | None:
    """The fine-tuning task of the run that wrote ``loaded`` (a checkpoint whose run's ``run.json`` names a
    fine-tuning task), else None: pretraining runs, folders that are no run's checkpoint, unreadable records."""
    if loaded.path is None:
        return None
    run = RunFolder.of_checkpoint(loaded.path)
    if not RunFolder.is_run(run.root):
        return None
    record = spec_record(run)                   # a damaged or unreadable record comes back as Damaged
    task = record.task if isinstance(record, RunRecord) else None
    return task if is_finetuning(task) else None


def untrained_mlm_task(loaded: LoadedModel) -> str | None:
    """The fine-tuning task, spelled for a reader ("token classification"), when ``loaded`` has a masked-LM head
    that its fine-tuning did not train; None when it has none, or its task trains one (QA with MLM)."""
    task = finetuned_task(loaded)
    if task is None or "mlm" not in loaded.heads or "mlm" in task_definition(task).heads:
        return None
    return task.replace("_", " ")


def untrained_mlm_note(name: str, loaded: LoadedModel) -> str | None:
    """One sentence saying that model ``name``'s fill-mask guesses are not meaningful and why, or None."""
    task = untrained_mlm_task(loaded)
    if task is None:
        return None
    return (f"ℹ️ Model {name} was {gloss('fine-tune', 'fine-tuned')} for **{task}**; its masked-LM head was not "
            "trained in fine-tuning (only the task's head and the encoder under it were), so its fill-mask guesses "
            "are not meaningful.")
