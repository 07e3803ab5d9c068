"""Training tasks for the one ``Trainer``: pretraining (MLM + NSP), extractive QA (alone or with MLM/NSP
kept alive, ``qa_mlm``), sequence classification, token classification, multiple choice."""
from __future__ import annotations

from engine.training.loop.config import TrainingConfig
from engine.training.tasks.base import (
    TaskOutput, TrainBatch, TrainData, TrainingTask, freeze_encoder, freeze_unused,
)
from engine.training.tasks.pretraining import PretrainingTask, build_datasets

__all__ = ["TaskOutput", "TrainBatch", "TrainData", "TrainingTask", "PretrainingTask", "build_datasets",
           "freeze_encoder", "freeze_unused", "task_for"]


def task_for(config: TrainingConfig) -> TrainingTask:
    """The task ``config.task`` names."""
    if config.task == "pretraining":
        return PretrainingTask(config)
    from engine.training.tasks.finetuning import ClassificationTask, QATask
    if config.task == "qa":
        return QATask()
    if config.task == "qa_mlm":
        from engine.training.tasks.qa_with_mlm import QAWithMLMTask
        return QAWithMLMTask(config)
    if config.task == "classification":
        return ClassificationTask()
    if config.task == "token_classification":
        from engine.training.tasks.token_classification import TokenClassificationTask
        return TokenClassificationTask()
    if config.task == "multiple_choice":
        from engine.training.tasks.multiple_choice import MultipleChoiceTask
        return MultipleChoiceTask()
    raise ValueError(f"unknown task {config.task!r}")
