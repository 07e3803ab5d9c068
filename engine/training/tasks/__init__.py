"""Training tasks for the one ``Trainer``: pretraining (MLM + NSP), extractive QA (alone or with MLM/NSP
kept alive, ``qa_mlm``), sequence classification, token classification, multiple choice.

Each task module holds its ``TrainingTask`` (the loop's contract, ``engine.training.loop.training_task``) and
its ``TaskDefinition``; the lines below register the built-in
ones in ``engine.training.tasks.registry.TRAINING_TASKS`` (this package's ``__init__`` runs before any of its modules,
the registry included, is imported, so ``TRAINING_TASKS`` is complete wherever it is read). A new task: one module and
one line here.
"""
from __future__ import annotations

from typing import Any, Mapping

from engine.training.loop.config import TrainingConfig
from engine.training.loop.training_task import TrainingTask
from engine.training.tasks.finetuning import CLASSIFICATION, QA
from engine.training.tasks.multiple_choice import MULTIPLE_CHOICE
from engine.training.tasks.pretraining import PRETRAINING
from engine.training.tasks.qa_with_mlm import QA_MLM
from engine.training.tasks.registry import register, task_definition
from engine.training.tasks.token_classification import TOKEN_CLASSIFICATION

register(PRETRAINING)
register(QA)
register(QA_MLM)
register(CLASSIFICATION)
register(TOKEN_CLASSIFICATION)
register(MULTIPLE_CHOICE)


def task_for(config: TrainingConfig, task_settings: Mapping[str, Any] | None = None) -> TrainingTask:
    """The task object ``config.task`` names (its registered ``TaskDefinition.make``) holding its own settings
    (``task_settings`` by field name, the others their defaults), to hand to the ``Trainer``; ValueError for an
    unknown name or setting."""
    return task_definition(config.task).make_task(config, task_settings)
