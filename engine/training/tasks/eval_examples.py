"""What a fine-tuning run predicts for a few held-out examples right now: the Fine-tune tab's table of
examples the model gets wrong.

``eval_examples(trainer)`` runs the model (eval mode, no gradients, under the trainer's lock) on the
first ``EVAL_EXAMPLES`` features of the run's held-out data and returns one ``ExamplePrediction`` per
feature: the input as the model read it (decoded from its token ids), the expected and the predicted
answer, the model's probability for its prediction, and whether it is right. "Right" is what the
task's own metric counts (``engine.training.tasks``): classification, the arg-max class; QA, the
arg-max start *and* the arg-max end equal the labelled span (``span_acc``), the first token when the window
does not hold the answer; multiple choice, the top-scored choice is the labelled one (``accuracy``).

Token classification is scored by word (``accuracy`` over labelled words) and predicted by sentence: a
prediction is one held-out sentence, "right" when *every* labelled word's arg-max tag is its tag, so
the share of predictions right is the share of sentences tagged without a mistake (at most the word
accuracy). Its ``words`` and ``words_right`` count the labelled words and those tagged right, the same
arg-max decisions the metric counts: summed over the held-out set, ``words_right / words`` is ``accuracy``.
Its ``sentence`` holds the labelled words and ``mistakes`` one ``WordMistake`` per wrongly tagged word (the
word, its place, the expected and the predicted tag and the model's probability of that tag), so the table
can show one row per wrong word.

A task's predictor is its ``TaskDefinition.predictor`` (``engine.training.tasks.registry``; one of the
``predict_*`` functions here); a task without one (pretraining) has no table. The worker calls this after
every evaluation (``WorkerCallback.on_evaluate``).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.data.features import IGNORE_INDEX, FeatureDataset
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.tasks.registry import TRAINING_TASKS

EVAL_EXAMPLES = 16          # held-out features looked at after each evaluation
NO_ANSWER = "(no answer in this window)"


@dataclass(frozen=True)
class WordMistake:
    """One wrongly tagged word of a token-classification prediction."""

    position: int           # the word's place among the sentence's labelled words (``ExamplePrediction.sentence``)
    word: str
    expected: str
    predicted: str
    confidence: float       # the model's probability of ``predicted`` for this word (at its first piece)


@dataclass(frozen=True)
class ExamplePrediction:
    """One held-out feature: what the model read, what it should say, what it says and how sure it is."""

    index: int              # the feature's position in the held-out data
    text: str               # the input (QA: the question)
    context: str            # QA: the context window; "" for classification
    expected: str
    predicted: str
    confidence: float       # the model's probability of ``predicted`` (QA: p_start · p_end; tags: their product)
    correct: bool
    words: int = 0          # token classification: labelled words in the sentence
    words_right: int = 0    # token classification: of those, tagged right
    sentence: tuple[str, ...] = ()              # token classification: the labelled words, in order
    mistakes: tuple[WordMistake, ...] = ()      # token classification: the words tagged wrong, in order


@dataclass(frozen=True)
class EvalExamples:
    """The predictions made after the evaluation of ``step``."""

    step: int
    task: str
    predictions: list[ExamplePrediction]

    @property
    def wrong(self) -> list[ExamplePrediction]:
        return [p for p in self.predictions if not p.correct]


def _segments(tokenizer: WordPieceTokenizer, row: np.ndarray, segment_start: int) -> tuple[str, str]:
    """The text of the first and of the second text (empty when there is none) of a feature in the tokenizer's
    template (BERT: ``[CLS] A [SEP] (B [SEP])``; its special tokens are skipped)."""
    first = tokenizer.decode(row[:segment_start].tolist()).strip()
    second = tokenizer.decode(row[segment_start:].tolist()).strip() if segment_start < len(row) else ""
    return first, second


def predict_class(model: torch.nn.Module, tokenizer: WordPieceTokenizer, data: FeatureDataset,
                  indices: list[int], device: torch.device) -> list[ExamplePrediction]:
    """One prediction per text (pair): the arg-max class and its probability."""
    batch = data.collate(indices).to(device)
    out = model(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                compute=("classifier",))
    probs = out.classifier.logits.float().softmax(-1)                     # (B, num_labels)
    confidence, predicted = probs.max(-1)                                 # (B,) each
    names = model.config.id2label
    found = []
    for r, i in enumerate(indices):
        first, second = _segments(tokenizer, data.rows[i], int(data.segment_starts[i]))
        gold, guess = int(data.targets[i, 0]), int(predicted[r])
        found.append(ExamplePrediction(i, f"{first} ‖ {second}" if second else first, "",
                                       names.get(gold, str(gold)), names.get(guess, str(guess)),
                                       float(confidence[r]), gold == guess))
    return found


def predict_span(model: torch.nn.Module, tokenizer: WordPieceTokenizer, data: FeatureDataset, indices: list[int],
                 device: torch.device) -> list[ExamplePrediction]:
    """One prediction per window: the arg-max start and end (a span, or no answer) and p_start · p_end."""
    batch = data.collate(indices).to(device)
    out = model(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                compute=("qa",))
    masked = batch.attention_mask == 0                                    # (B, S) padding never wins
    start = out.qa.start_logits.float().masked_fill(masked, float("-inf")).softmax(-1)   # (B, S)
    end = out.qa.end_logits.float().masked_fill(masked, float("-inf")).softmax(-1)       # (B, S)
    p_start, starts = start.max(-1)                                       # (B,) each
    p_end, ends = end.max(-1)

    def span(row: np.ndarray, s: int, e: int) -> str:
        if s == 0 and e == 0:
            return NO_ANSWER
        if s == 0 or e == 0 or e < s:
            return f"(no span: start {s}, end {e})"
        return tokenizer.decode(row[s:e + 1].tolist()).strip()     # a byte-level span starts with its space

    found = []
    for r, i in enumerate(indices):
        row = data.rows[i]
        question, context = _segments(tokenizer, row, int(data.segment_starts[i]))
        gold = (int(data.targets[i, 0]), int(data.targets[i, 1]))
        guess = (int(starts[r]), int(ends[r]))
        found.append(ExamplePrediction(i, question, context, span(row, *gold), span(row, *guess),
                                       float(p_start[r] * p_end[r]), gold == guess))
    return found


WRONG_MARK = "✗"           # after a wrongly tagged word in a token-classification prediction


def predict_tags(model: torch.nn.Module, tokenizer: WordPieceTokenizer, data: FeatureDataset,
                 indices: list[int], device: torch.device) -> list[ExamplePrediction]:
    """One prediction per sentence: ``word/TAG`` for each labelled word (its first piece's tag and the
    rest of its pieces), predicted tags that differ from the label marked with ``WRONG_MARK``; the words and
    one ``WordMistake`` per wrongly tagged word (with the probability of its predicted tag)."""
    batch = data.collate(indices).to(device)
    out = model(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                compute=("token_classifier",))
    probs = out.token_classifier.logits.float().softmax(-1)               # (B, S, L)
    confidence, predicted = probs.max(-1)                                 # (B, S) each
    names = model.config.id2label
    found = []
    for r, i in enumerate(indices):
        row = data.rows[i]
        labels = data.targets[i, :len(row)]                                # (S_i,) -100 where unlabelled
        starts = [int(p) for p in np.flatnonzero(labels != IGNORE_INDEX)]
        ends = starts[1:] + [len(row)]            # a word runs to the next one (decoding skips the special tokens)
        words, gold, guess, mistakes, p = [], [], [], [], 1.0
        for position, (start, end) in enumerate(zip(starts, ends)):
            word = tokenizer.decode(row[start:end].tolist()).strip()
            want, got = int(labels[start]), int(predicted[r, start])
            want_name, got_name = names.get(want, str(want)), names.get(got, str(got))
            words.append(word)
            gold.append(f"{word}/{want_name}")
            guess.append(f"{word}/{got_name}" + ("" if got == want else WRONG_MARK))
            if got != want:
                mistakes.append(WordMistake(position, word, want_name, got_name, float(confidence[r, start])))
            p *= float(confidence[r, start])
        found.append(ExamplePrediction(i, " ".join(words), "", " ".join(gold), " ".join(guess), p, not mistakes,
                                       len(starts), len(starts) - len(mistakes), tuple(words), tuple(mistakes)))
    return found


def predict_choice(model: torch.nn.Module, tokenizer: WordPieceTokenizer, data: FeatureDataset,
                   indices: list[int], device: torch.device) -> list[ExamplePrediction]:
    """One prediction per example: the context as text, the choices (numbered) as its context, the right
    and the top-scored choice, and the model's probability (softmax over the choices) of its pick."""
    batch = data.collate(indices).to(device)
    out = model(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                compute=("multiple_choice",))                              # inputs (B, C, S)
    probs = out.multiple_choice.logits.float().softmax(-1)                # (B, C)
    confidence, predicted = probs.max(-1)                                 # (B,) each
    found = []
    for r, i in enumerate(indices):
        rows, starts = data.rows[i], data.segment_starts[i]
        texts = [_segments(tokenizer, row, int(start)) for row, start in zip(rows, starts)]
        context = max((first for first, _ in texts), key=len)             # truncation may cut it per choice
        choices = [f"{c}: {second}" for c, (_, second) in enumerate(texts)]
        gold, guess = int(data.targets[i, 0]), int(predicted[r])
        found.append(ExamplePrediction(i, context, " · ".join(choices), choices[gold], choices[guess],
                                       float(confidence[r]), gold == guess))
    return found


def eval_examples(trainer: Any, limit: int = EVAL_EXAMPLES) -> EvalExamples | None:
    """Predictions for the first ``limit`` held-out features of ``trainer``'s run, now; None when its task
    has no predictor or it has no held-out data. Holds the trainer's lock; the model's mode is restored."""
    task = trainer.config.task
    definition = TRAINING_TASKS.get(task)
    predictor = definition.predictor if definition is not None else None
    data = getattr(trainer.eval_data, "qa", trainer.eval_data)            # qa_mlm: the QA half
    if predictor is None or not isinstance(data, FeatureDataset) or len(data) == 0:
        return None
    indices = list(range(min(limit, len(data))))
    model = trainer.model
    lock = getattr(trainer, "lock", None) or contextlib.nullcontext()
    with lock:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                predictions = predictor(model, trainer.tokenizer, data, indices, trainer.device)
        finally:
            model.train(was_training)
    return EvalExamples(trainer.global_step, task, predictions)
