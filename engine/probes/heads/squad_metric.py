"""The official SQuAD evaluations, v1.1 and v2.0: exact match and token F1 (docs/design/qa.md),
and v2.0's no-answer threshold.

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


# ---------------------------------------------------------------------------------------------- SQuAD v2.0
def _v2_tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_v2(gold: str, prediction: str) -> int:
    """v2.0's exact match: 1 if the normalised texts are equal ("" = "" for a no-answer question)."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_v2(gold: str, prediction: str) -> float:
    """v2.0's token F1: as v1.1, except that when either side is empty (no answer) it is 1 if both are."""
    gold_tokens, predicted = _v2_tokens(gold), _v2_tokens(prediction)
    if not gold_tokens or not predicted:
        return float(gold_tokens == predicted)
    common = sum((Counter(gold_tokens) & Counter(predicted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _v2_golds(answers: Sequence[str]) -> list[str]:
    """The gold texts v2.0 scores against: those that normalise to something, else [""] (no answer)."""
    kept = [text for text in answers if normalize_answer(text)]
    return kept or [""]


def _with_threshold(raw: Mapping[str, float], na_probs: Mapping[str, float], has_answer: Mapping[str, bool],
                    threshold: float) -> dict[str, float]:
    """Scores once a question with ``na_prob > threshold`` is answered "" (1 when it has no answer)."""
    return {qid: float(not has_answer[qid]) if na_probs[qid] > threshold else score for qid, score in raw.items()}


def best_threshold(predictions: Mapping[str, str], raw: Mapping[str, float], na_probs: Mapping[str, float],
                   has_answer: Mapping[str, bool]) -> tuple[float, float]:
    """(best total x 100, its threshold): the official v2.0 script's search, step for step.

    Start with every question answered "" (the no-answer questions score 1), walk the questions by
    increasing ``na_prob``, answering each in turn (+ its score if it has an answer, - 1 if it has none
    and the prediction is not empty), and keep the best total and the ``na_prob`` where it was reached.
    Like the script, questions with equal ``na_prob`` are taken one at a time, so a best total may be
    reached inside a run of ties (the threshold then answers the whole run).
    """
    score = best = float(sum(1 for qid in has_answer if not has_answer[qid]))
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):       # stable: input order among ties
        if qid not in raw:
            continue
        if has_answer[qid]:
            score += raw[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(raw), threshold


def evaluate_v2(predictions: Mapping[str, str], dataset: Any, na_probs: Mapping[str, float] | None = None,
                threshold: float = 1.0) -> dict[str, float]:
    """The official SQuAD v2.0 evaluation (``evaluate-v2.0.py``) of ``predictions`` (question id -> text,
    "" for "no answer").

    ``dataset``: as `evaluate` (a question with no gold answer has none: an ``is_impossible`` question).
    ``na_probs`` (question id -> how much the model prefers no answer; 0 for all when None): a question
    whose value is above ``threshold`` counts as answered "". Returns the script's keys: ``exact``,
    ``f1``, ``total``, ``HasAns_exact/f1/total`` and ``NoAns_exact/f1/total`` (when there are such
    questions) at ``threshold``, and ``best_exact``, ``best_exact_thresh``, ``best_f1``,
    ``best_f1_thresh`` (the threshold picked on this data). Every question must have a prediction.
    """
    pairs = _gold_pairs(dataset)
    if not pairs:
        raise ValueError("the dataset has no questions to evaluate")
    missing = [qid for qid, _ in pairs if qid not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} questions have no prediction (e.g. {missing[0]!r}); "
                         "predict \"\" for no answer")
    na_probs = {qid: 0.0 for qid, _ in pairs} if na_probs is None else na_probs
    has_answer = {qid: bool(golds) for qid, golds in pairs}       # as the script: any gold answer listed
    exact_raw = {qid: float(max(exact_v2(g, predictions[qid]) for g in _v2_golds(golds))) for qid, golds in pairs}
    f1_raw = {qid: max(f1_v2(g, predictions[qid]) for g in _v2_golds(golds)) for qid, golds in pairs}
    exact = _with_threshold(exact_raw, na_probs, has_answer, threshold)
    f1 = _with_threshold(f1_raw, na_probs, has_answer, threshold)

    def block(ids: list[str]) -> dict[str, float]:
        return {"exact": 100.0 * sum(exact[q] for q in ids) / len(ids),
                "f1": 100.0 * sum(f1[q] for q in ids) / len(ids), "total": len(ids)}

    result = block([qid for qid, _ in pairs])
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [qid for qid, _ in pairs if has_answer[qid] is wanted]
        if ids:
            result.update({f"{prefix}_{k}": v for k, v in block(ids).items()})
    best_exact, exact_thresh = best_threshold(predictions, exact_raw, na_probs, has_answer)
    best_f1, f1_thresh = best_threshold(predictions, f1_raw, na_probs, has_answer)
    result.update(best_exact=best_exact, best_exact_thresh=exact_thresh, best_f1=best_f1, best_f1_thresh=f1_thresh)
    return result
