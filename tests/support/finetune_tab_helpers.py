"""The Fine-tune tab's tests: the app's services over a tiny BERT that knows the examples' words, and the
form's values as ``/finetune_start`` and ``make_job`` take them."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from engine.training.worker.training_worker import TrainingWorker
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.finetune_helpers import save_tiny_model, word_tokenizer


@contextlib.contextmanager
def tiny_app_services(root: Path, texts: list[str]) -> Iterator[Services]:
    """Services whose ``default`` model is a tiny BERT with a vocabulary of ``texts``' words; runs under
    ``root/runs``; the worker is closed on exit."""
    tokenizer = word_tokenizer(texts)
    model = save_tiny_model(root / "model", tokenizer)
    worker = TrainingWorker(root / "runs")
    registry = ModelRegistry(runs_root=root / "runs", worker=worker, default_dir=model)
    try:
        yield Services(tokenizer=tokenizer, max_length=128, worker=worker, models=registry)
    finally:
        worker.close(timeout_s=30)


def form(task: str, **changes: Any) -> list[Any]:
    """The form's inputs in order: the task's bundled example and defaults unless ``changes`` say otherwise."""
    values = dict(model_key="default", task=task, data_source="example", example="", data_file=None, labels="",
                  steps=None, batch_size=None, learning_rate=None, seq_length=None, eval_fraction=None,
                  report_to="none")
    values.update(changes)
    return list(values.values())
