"""Token classification (tagging) as a ``TrainingTask``: a label per word, as ``BertForTokenClassification``.

The loss is the mean cross-entropy over the labelled tokens (each word's first piece; -100
elsewhere), so a micro-batch weighs by its labelled tokens and an accumulated step equals one big
batch. Metrics: ``token_classification_loss`` and ``accuracy`` (over the labelled tokens, i.e.
words). When the labels are BIO tags (every label ``O`` or ``B-``/``I-``/``E-``/``S-`` + a type),
evaluation adds ``entity_precision``, ``entity_recall`` and ``entity_f1``: ``seqeval``'s micro
scores (its default, conlleval-style entity reading) over the held-out words. Entities are counted
at evaluation only, where the predictions go to the host anyway; a training step keeps its one sync.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import torch

from engine.data.features import IGNORE_INDEX, FeatureDataset, FinetuneBatch
from engine.model.heads import BertWithHeads
from engine.model.outputs import HeadsOutput
from engine.training.tasks.task_data import token_data
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.eval_examples import predict_tags
from engine.training.tasks.finetuning import _FeatureTask
from engine.training.tasks.registry import TaskDefinition

_BIO = re.compile(r"^[BIES]-.+$")


def is_bio(labels: Sequence[str]) -> bool:
    """True when every label is ``O`` or a ``B-``/``I-``/``E-``/``S-`` tag, and one is not ``O``."""
    return any(label != "O" for label in labels) and all(label == "O" or _BIO.match(label) for label in labels)


def entity_counts(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> tuple[int, int, int]:
    """(correct, predicted, gold) entity counts over sentences of tags, as ``seqeval`` reads entities;
    precision = correct / predicted and recall = correct / gold are its micro averages."""
    from seqeval.metrics.sequence_labeling import get_entities   # here: seqeval imports scikit-learn (seconds)
    true, guessed = set(get_entities([list(s) for s in gold])), set(get_entities([list(s) for s in predicted]))
    return len(true & guessed), len(guessed), len(true)


def tag_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """The share of words whose predicted tag is the gold one, over sentences of tags."""
    pairs = [(g, p) for sentence, guessed in zip(gold, predicted) for g, p in zip(sentence, guessed)]
    if not pairs:
        raise ValueError("no tagged word to score")
    return sum(g == p for g, p in pairs) / len(pairs)


def entity_f1(correct: float, predicted: float, gold: float) -> tuple[float, float, float]:
    """(precision, recall, F1) from ``entity_counts``' three counts (0 where a count is 0, as seqeval's zero
    division gives)."""
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)


class TokenClassificationTask(_FeatureTask):
    """A label per word from its first piece's last hidden state."""

    name, head, layout = "token_classification", "token_classifier", "tags"
    stat_names = ("token_classification_loss_sum", "correct", "entities_correct", "entities_predicted",
                  "entities_gold")

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self.id2label: dict[int, str] = {}
        self.bio = False

    def check(self, model: BertWithHeads, train_data: FeatureDataset, eval_data: FeatureDataset | None,
              config: TrainingConfig) -> None:
        super().check(model, train_data, eval_data, config)
        labels = model.config.num_labels
        for data in (train_data, eval_data):
            if data is not None and data.targets.size and int(data.targets.max()) >= labels:
                raise ValueError(f"the data has label ids up to {int(data.targets.max())} but the model's "
                                 f"token classifier has {labels} labels")
        self.id2label = dict(model.config.id2label)
        self.bio = is_bio(list(self.id2label.values()))

    def counts(self, batch: FinetuneBatch) -> tuple[int]:
        return (int((batch.token_labels != IGNORE_INDEX).sum()),)

    def forward(self, net: torch.nn.Module, batch: FinetuneBatch, config: TrainingConfig) -> HeadsOutput:
        return net(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                   token_labels=batch.token_labels, compute=("token_classifier",))

    def losses(self, out: HeadsOutput) -> list[torch.Tensor]:
        return [out.token_classifier.loss]

    def tally(self, out: HeadsOutput, batch: FinetuneBatch, counts: Sequence[int]) -> torch.Tensor:
        entities = self.bio and not torch.is_grad_enabled()      # evaluation: count entities too
        result = out.token_classifier
        with torch.no_grad():
            labels = batch.token_labels                                       # (B, S)
            predicted = result.logits.argmax(-1)                              # (B, S, L) -> (B, S)
            labelled = labels != IGNORE_INDEX                                 # (B, S)
            correct = ((predicted == labels) & labelled).sum().float()
            sums = [result.loss.detach().float() * counts[0], correct]
            found = torch.zeros(3, device=correct.device)
            if entities:
                found += torch.tensor(self._entities(labels, predicted, labelled), dtype=torch.float,
                                      device=correct.device)
            return torch.cat((torch.stack(sums), found))

    def _entities(self, labels: torch.Tensor, predicted: torch.Tensor, labelled: torch.Tensor) -> tuple[int, int, int]:
        gold, guessed = [], []
        names = self.id2label
        for row_labels, row_predicted, row_mask in zip(labels.tolist(), predicted.tolist(), labelled.tolist()):
            gold.append([names[g] for g, keep in zip(row_labels, row_mask) if keep])
            guessed.append([names.get(p, "O") for p, keep in zip(row_predicted, row_mask) if keep])
        return entity_counts(gold, guessed)

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        n = max(1, totals[0])
        result = {"token_classification_loss": sums[0] / n, "accuracy": sums[1] / n}
        correct, predicted, gold = sums[2:5]
        if self.bio and gold > 0:
            precision, recall, f1 = entity_f1(correct, predicted, gold)
            result.update(entity_precision=precision, entity_recall=recall, entity_f1=f1)
        return result


TOKEN_CLASSIFICATION = TaskDefinition(
    name=TokenClassificationTask.name, heads=(TokenClassificationTask.head,),
    make=lambda config, settings: TokenClassificationTask(settings), loss="token_classification_loss",
    metrics=("accuracy", "entity_f1"),
    shown=(("token_classification_loss", ".4f"), ("accuracy", ".3f")), data=token_data,
    defaults=dict(seq_len=128, batch_size=32), training=dict(nsp=False), predictor=predict_tags)
