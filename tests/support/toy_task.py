"""A toy fine-tuning task, as a new task's module would be: classification with label smoothing.

It is the recipe of ``docs/ARCHITECTURE.md`` carried out: its own settings dataclass (``label_smoothing``, which
changes its loss), a ``TrainingTask`` that holds them and reads them in its loss, the classification data builder
reused by declaring it (the builder makes features of the ``label`` layout, which the task trains on), and one
``TaskDefinition``. Tests register it for a ``with`` block (``registered(SMOOTHED)``); nothing else names it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from engine.data.features import FinetuneBatch
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.eval_examples import predict_class
from engine.training.tasks.finetuning import ClassificationTask
from engine.training.tasks.registry import TaskDefinition
from engine.training.tasks.task_data import classification_data


@dataclass(frozen=True)
class SmoothingSettings:
    """How much of each target's probability is spread over the other labels."""

    label_smoothing: float = field(default=0.0, metadata={
        "help": "share of each target spread evenly over every label, 0 to under 1"})

    def __post_init__(self) -> None:
        if not isinstance(self.label_smoothing, (int, float)) or not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing!r}")


@dataclass
class SmoothedOutput:
    """The class logits (B, L) and the smoothed loss of a batch."""

    logits: torch.Tensor
    loss: torch.Tensor


class SmoothedClassificationTask(ClassificationTask):
    """Classification (the family's classifier head, ``label`` features) with a label-smoothed cross-entropy."""

    name = "toy_smoothed_classification"
    stat_names = ("toy_loss_sum", "correct")

    def forward(self, net: torch.nn.Module, batch: FinetuneBatch, config: TrainingConfig) -> SmoothedOutput:
        out = net(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                  compute=("classifier",))
        logits = out.classifier.logits                                                   # (B, L)
        loss = F.cross_entropy(logits.float(), batch.class_labels, label_smoothing=self.settings.label_smoothing)
        return SmoothedOutput(logits, loss)

    def losses(self, out: SmoothedOutput) -> list[torch.Tensor]:
        return [out.loss]

    def tally(self, out: SmoothedOutput, batch: FinetuneBatch, counts: Any) -> torch.Tensor:
        with torch.no_grad():
            correct = (out.logits.argmax(-1) == batch.class_labels).sum().float()
            return torch.stack((out.loss.detach().float() * counts[0], correct))

    def metrics(self, sums: Any, totals: Any) -> dict[str, Any]:
        n = max(1, totals[0])
        return {"toy_loss": sums[0] / n, "accuracy": sums[1] / n}


SMOOTHED = TaskDefinition(
    name=SmoothedClassificationTask.name, heads=("classifier",),
    make=lambda config, settings: SmoothedClassificationTask(settings), loss="toy_loss", metrics=("accuracy",),
    shown=(("toy_loss", ".4f"), ("accuracy", ".3f")), data=classification_data,
    defaults=dict(seq_len=64, batch_size=8), training=dict(nsp=False), predictor=predict_class,
    settings=SmoothingSettings, label="Classify with label smoothing (toy)",
    formats="**CSV** with `text` and `label` columns.", extensions=(".csv",))
