"""What a fine-tuning run's metrics are called in a figure's legend and a status line: one table for the
Fine-tune tab (its live curves and status) and the run browser (any run in the runs folder), so both name a
metric alike ("answer F1", not ``f1``). The metrics themselves are the task's (its ``TaskDefinition.metrics``,
``engine.training.tasks.registry``); a metric with no entry here is shown by its key.
"""
from __future__ import annotations

from engine.training.tasks.finetuning import CLASSIFICATION, QA
from engine.training.tasks.multiple_choice import MULTIPLE_CHOICE
from engine.training.tasks.registry import TaskDefinition
from engine.training.tasks.token_classification import TOKEN_CLASSIFICATION

# task name -> {metric key -> its name in a legend}
LEGENDS: dict[str, dict[str, str]] = {
    CLASSIFICATION.name: {"accuracy": "accuracy"},
    QA.name: {"f1": "answer F1", "exact_match": "answer exact match", "span_acc": "exact span"},
    TOKEN_CLASSIFICATION.name: {"accuracy": "word accuracy", "entity_f1": "entity F1"},
    MULTIPLE_CHOICE.name: {"accuracy": "accuracy"},
}


def metric_legends(definition: TaskDefinition) -> tuple[tuple[str, str], ...]:
    """(metric key, legend name) of each metric ``definition`` plots: train ``key``, held-out ``eval_key``."""
    names = LEGENDS.get(definition.name, {})
    return tuple((key, names.get(key, key)) for key in definition.metrics)
