"""Multiple choice as a ``TrainingTask``: which of C choices is right, as ``BertForMultipleChoice``.

Each example is C rows, the context and a choice as a pair in the tokenizer's template (BERT:
``[CLS] context [SEP] choice [SEP]``; input (B, C, S)); the family's multiple-choice head scores each row (BERT:
from its pooled first token), and the loss is the cross-entropy over the C scores. A micro-batch
weighs by its examples. Metrics: ``multiple_choice_loss`` and ``accuracy`` (the top-scored choice
is the right one; chance is 1/C). Its own setting (``ChoiceSettings``): how many choices the examples it builds
from a text, without a data file, have.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from engine.checks import is_int
from engine.data.multiple_choice import MAX_CHOICES, MIN_CHOICES
from engine.data.features import FinetuneBatch
from engine.model.outputs import HeadsOutput
from engine.training.tasks.task_data import choice_features
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.eval_examples import predict_choice
from engine.training.tasks.finetuning import _FeatureTask
from engine.training.tasks.registry import TaskDefinition


class MultipleChoiceTask(_FeatureTask):
    """One score per choice from the family's multiple-choice head; softmax over the choices."""

    name, head, layout = "multiple_choice", "multiple_choice", "choices"
    stat_names = ("multiple_choice_loss_sum", "correct")

    def uses_pooler(self, config: TrainingConfig) -> bool:
        return True

    def forward(self, net: torch.nn.Module, batch: FinetuneBatch, config: TrainingConfig) -> HeadsOutput:
        return net(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                   choice_labels=batch.choice_labels, compute=("multiple_choice",))      # inputs (B, C, S)

    def losses(self, out: HeadsOutput) -> list[torch.Tensor]:
        return [out.multiple_choice.loss]

    def tally(self, out: HeadsOutput, batch: FinetuneBatch, counts: Sequence[int]) -> torch.Tensor:
        result = out.multiple_choice
        with torch.no_grad():
            correct = (result.logits.argmax(-1) == batch.choice_labels).sum().float()   # logits (B, C)
            return torch.stack((result.loss.detach().float() * counts[0], correct))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        n = max(1, totals[0])
        return {"multiple_choice_loss": sums[0] / n, "accuracy": sums[1] / n}


@dataclass(frozen=True)
class ChoiceSettings:
    """Multiple choice's own setting: the choices of each "which sentence comes next?" example it builds from
    the job's text when there is no data file (a data file's examples have their own)."""

    num_choices: int = field(default=4, metadata={
        "help": f"without --data: choices per example, {MIN_CHOICES}-{MAX_CHOICES}"})

    def __post_init__(self) -> None:
        if not is_int(self.num_choices) or not MIN_CHOICES <= self.num_choices <= MAX_CHOICES:
            raise ValueError(f"num_choices must be {MIN_CHOICES} to {MAX_CHOICES}, got {self.num_choices!r}")


MULTIPLE_CHOICE = TaskDefinition(
    name=MultipleChoiceTask.name, heads=(MultipleChoiceTask.head,),
    make=lambda config, settings: MultipleChoiceTask(settings), loss="multiple_choice_loss", metrics=("accuracy",),
    shown=(("multiple_choice_loss", ".4f"), ("accuracy", ".3f")), data=choice_features,
    defaults=dict(seq_len=128, batch_size=8), training=dict(nsp=False), predictor=predict_choice,
    settings=ChoiceSettings, corpus_examples=True)
