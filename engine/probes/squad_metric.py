"""The official SQuAD v1.1 evaluation: exact match and token F1 (docs/ARCHITECTURE.md, "Extractive QA rules").

Normalisation is the official script's: lowercase, remove punctuation, remove the
articles a/an/the, collapse whitespace. Each question scores the best over its gold
answers; a question without a prediction scores 0; totals are means x 100.
"""
from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop articles, collapse whitespace (in the official order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, ground_truth: str) -> float:
    """1.0 if the normalised texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction: str, ground_truth: str) -> float:
    """Harmonic mean of token precision and recall over normalised tokens (0.0 with no overlap)."""
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def max_over_ground_truths(metric: Callable[[str, str], float], prediction: str,
                           ground_truths: Sequence[str]) -> float:
    """The best score of ``prediction`` against any gold answer (0.0 if there are none)."""
    return max((metric(prediction, gold) for gold in ground_truths), default=0.0)


def _gold_pairs(dataset: Any) -> list[tuple[str, list[str]]]:
    """(id, gold texts) from a SQuAD JSON (dict with "data", or its article list),
    an id -> answers mapping, or a list of (id, answers); answers are strings or {"text": ...}."""
    if isinstance(dataset, Mapping) and "data" in dataset:
        dataset = dataset["data"]
    if isinstance(dataset, Mapping):
        items: Iterable = dataset.items()
    elif dataset and isinstance(dataset, Sequence) and isinstance(dataset[0], Mapping) and "paragraphs" in dataset[0]:
        items = [(qa["id"], qa["answers"]) for article in dataset for paragraph in article["paragraphs"]
                 for qa in paragraph["qas"]]
    else:
        items = dataset
    pairs = []
    for qid, answers in items:
        if isinstance(answers, str):
            answers = [answers]
        elif isinstance(answers, Mapping):   # a Hugging Face datasets row: {"text": [...], "answer_start": [...]}
            answers = list(answers["text"])
        pairs.append((str(qid), [a["text"] if isinstance(a, Mapping) else str(a) for a in answers]))
    return pairs


def evaluate(predictions: Mapping[str, str], dataset: Any) -> dict[str, float]:
    """``{"exact_match", "f1"}``, each the mean over the dataset's questions x 100.

    ``dataset`` is a SQuAD v1.1 JSON, an id -> gold answers mapping, or (id, gold answers)
    pairs. Unanswered questions score 0. Raises ValueError if there are no questions.
    """
    pairs = _gold_pairs(dataset)
    if not pairs:
        raise ValueError("the dataset has no questions to evaluate")
    exact = f1 = 0.0
    for qid, golds in pairs:
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        if not isinstance(prediction, str):
            raise TypeError(f"the prediction for {qid!r} must be a str, got {type(prediction).__name__}")
        exact += max_over_ground_truths(exact_match_score, prediction, golds)
        f1 += max_over_ground_truths(f1_score, prediction, golds)
    return {"exact_match": 100.0 * exact / len(pairs), "f1": 100.0 * f1 / len(pairs)}
