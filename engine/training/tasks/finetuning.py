"""Fine-tuning tasks for the ``Trainer``: extractive QA (span head) and sequence classification.

Both weigh a micro-batch by its number of features, so the step loss is the mean over every
feature of the accumulated step, as one big batch would give.

* QA: loss = (CE(start) + CE(end)) / 2 as ``BertForQuestionAnswering``; metrics ``qa_loss``,
  ``start_acc``, ``end_acc`` (argmax = the labelled token) and ``span_acc`` (both right); evaluations
  add SQuAD ``exact_match`` and ``f1`` of the answer texts (``engine.training.tasks.squad_evaluation``).
* Classification: cross-entropy on the family's classification head (``BertForSequenceClassification``'s reads the
  pooled first token, RoBERTa's the first token itself); metrics ``classification_loss`` and ``accuracy``.

``QA`` and ``CLASSIFICATION`` are their ``TaskDefinition``s (``engine.training.tasks.registry``); QA's own
settings (``QASettings``: how long contexts are cut into windows) are its flags and Fine-tune form fields.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from engine.checks import is_int
from engine.data.features import FeatureDataset, FinetuneBatch
from engine.data.qa_features import QAFeatureDataset, check_lengths
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from engine.model.outputs import HeadsOutput
from engine.training.tasks.task_data import classification_data, qa_data
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.eval_examples import predict_class, predict_span
from engine.training.tasks.registry import TaskDefinition
from engine.training.tasks.squad_evaluation import evaluate_answers
from engine.training.loop.training_task import TrainingTask


class _FeatureTask(TrainingTask):
    """Shared parts: one loss term weighted by the features of the batch; ``FeatureDataset`` data whose target
    ``layout`` (``engine.data.features.TARGETS``) is the task's."""

    head = ""
    layout = ""

    def __init__(self, settings: Any = None) -> None:
        self.settings = settings

    def heads(self, config: TrainingConfig) -> tuple[str, ...]:
        return (self.head,)

    def check(self, model: BertWithHeads, train_data: FeatureDataset, eval_data: FeatureDataset | None,
              config: TrainingConfig) -> None:
        if self.head not in model.heads:
            raise ValueError(f"{self.name} fine-tuning needs a model with a {HEADS[self.head].noun} head")
        for name, data in (("training", train_data), ("evaluation", eval_data)):
            if data is None:
                continue
            if not isinstance(data, FeatureDataset) or data.layout != self.layout:
                raise ValueError(f"the {name} data is not features with {self.layout} targets, which {self.name} "
                                 "trains on (build it with engine.data: qa_features, classification, "
                                 "token_features or multiple_choice)")
            if data.max_seq_length != config.max_seq_length:
                raise ValueError(f"the {name} data was built with max_seq_length={data.max_seq_length} but the "
                                 f"training config says {config.max_seq_length}")
        if train_data.batch_size != config.batch_size:
            raise ValueError(f"the training data was built with batch_size={train_data.batch_size} but the "
                             f"training config says {config.batch_size}")

    def counts(self, batch: FinetuneBatch) -> tuple[int]:
        return (batch.size,)


class QATask(_FeatureTask):
    """Start/end positions of the answer span (0, the first token, when the window does not hold it)."""

    name, head, layout = "qa", "qa", "span"
    stat_names = ("qa_loss_sum", "start_correct", "end_correct", "span_correct")

    def forward(self, net: torch.nn.Module, batch: FinetuneBatch, config: TrainingConfig) -> HeadsOutput:
        return net(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                   start_positions=batch.start_positions, end_positions=batch.end_positions, compute=("qa",))

    def losses(self, out: HeadsOutput) -> list[torch.Tensor]:
        return [out.qa.loss]

    def tally(self, out: HeadsOutput, batch: FinetuneBatch, counts: Sequence[int]) -> torch.Tensor:
        span = out.qa
        with torch.no_grad():
            start_ok = span.start_logits.argmax(-1) == batch.start_positions      # (B,)
            end_ok = span.end_logits.argmax(-1) == batch.end_positions            # (B,)
            return torch.stack((span.loss.detach().float() * counts[0], start_ok.sum().float(),
                                end_ok.sum().float(), (start_ok & end_ok).sum().float()))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        n = max(1, totals[0])
        return {"qa_loss": sums[0] / n, "start_acc": sums[1] / n, "end_acc": sums[2] / n, "span_acc": sums[3] / n}

    def answer_metrics(self, model: torch.nn.Module, tokenizer: Any, eval_data: FeatureDataset,
                       batches: int) -> dict[str, Any]:
        """SQuAD exact match and F1 (v2.0: with the null threshold picked on them, HasAns / NoAns) of the
        answers to the questions behind the evaluated windows (``engine.training.tasks.squad_evaluation``)."""
        if tokenizer is None or not isinstance(eval_data, QAFeatureDataset):
            return {}
        questions = eval_data.questions_of_first(batches * eval_data.batch_size)
        return evaluate_answers(model, tokenizer, questions, eval_data.max_seq_length, eval_data.doc_stride,
                                eval_data.max_question_len)


class ClassificationTask(_FeatureTask):
    """A class per text (pair) from the family's classification head (BERT: the pooled first token)."""

    name, head, layout = "classification", "classifier", "label"
    stat_names = ("classification_loss_sum", "correct")

    def uses_pooler(self, config: TrainingConfig) -> bool:
        return True

    def check(self, model: BertWithHeads, train_data: FeatureDataset, eval_data: FeatureDataset | None,
              config: TrainingConfig) -> None:
        super().check(model, train_data, eval_data, config)
        for data in (train_data, eval_data):
            if data is not None and data.targets.size and int(data.targets.max()) >= model.config.num_labels:
                raise ValueError(f"the data has class ids up to {int(data.targets.max())} but the model's "
                                 f"classifier has {model.config.num_labels} labels")
        if model.config.num_labels < 2:
            raise ValueError("classification needs at least two labels")

    def forward(self, net: torch.nn.Module, batch: FinetuneBatch, config: TrainingConfig) -> HeadsOutput:
        return net(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                   class_labels=batch.class_labels, compute=("classifier",))

    def losses(self, out: HeadsOutput) -> list[torch.Tensor]:
        return [out.classifier.loss]

    def tally(self, out: HeadsOutput, batch: FinetuneBatch, counts: Sequence[int]) -> torch.Tensor:
        result = out.classifier
        with torch.no_grad():
            correct = (result.logits.argmax(-1) == batch.class_labels).sum().float()
            return torch.stack((result.loss.detach().float() * counts[0], correct))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        n = max(1, totals[0])
        return {"classification_loss": sums[0] / n, "accuracy": sums[1] / n}


@dataclass(frozen=True)
class QASettings:
    """How QA cuts a long context into windows, as ``run_squad.py`` does: each window holds the question and
    the context's next part, overlapping the previous window by ``doc_stride`` tokens."""

    doc_stride: int = field(default=128, metadata={"help": "context tokens shared by consecutive windows"})
    max_question_len: int = field(default=64, metadata={"help": "questions are cut to this many tokens"})

    def __post_init__(self) -> None:
        for name, low in (("doc_stride", 0), ("max_question_len", 1)):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")

    def check_job(self, spec: Any, config: TrainingConfig) -> None:
        """Questions and windows fit ``max_seq_length`` whatever the tokenizer's template (its specials are
        counted by ``check_tokenizer`` once it is known)."""
        check_lengths(config.max_seq_length, self.doc_stride, self.max_question_len, specials=0)

    def check_tokenizer(self, config: TrainingConfig, tokenizer: Any) -> None:
        """The same with the special tokens of the tokenizer's pair template (BERT's 3, RoBERTa's 4)."""
        check_lengths(config.max_seq_length, self.doc_stride, self.max_question_len,
                      tokenizer.num_special_tokens(pair=True))


QA = TaskDefinition(
    name=QATask.name, heads=(QATask.head,), make=lambda config, settings: QATask(settings), loss="qa_loss",
    metrics=("f1", "exact_match", "span_acc"),
    shown=(("qa_loss", ".4f"), ("start_acc", ".3f"), ("end_acc", ".3f")), data=qa_data,
    defaults=dict(seq_len=384, batch_size=16), training=dict(nsp=False), predictor=predict_span,
    settings=QASettings)

CLASSIFICATION = TaskDefinition(
    name=ClassificationTask.name, heads=(ClassificationTask.head,),
    make=lambda config, settings: ClassificationTask(settings), loss="classification_loss", metrics=("accuracy",),
    shown=(("classification_loss", ".4f"), ("accuracy", ".3f")), data=classification_data,
    defaults=dict(seq_len=128, batch_size=32), training=dict(nsp=False), predictor=predict_class)
