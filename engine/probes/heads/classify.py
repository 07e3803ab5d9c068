"""Sequence classification: label scores for a text (or text pair), as ``transformers``' text-classification pipeline.

``classify(loaded, text, text_pair)`` returns what ``pipeline("text-classification", top_k=None)``
returns on the same weights: ``[{"label", "score"}]`` for every label, best first. The pipeline's
rules, matched here:

* the input is ``[CLS] text [SEP]`` or ``[CLS] text [SEP] text_pair [SEP]`` (its ``{"text",
  "text_pair"}`` input);
* the scores are the softmax of the ``classifier`` head's logits, or their sigmoid when the model
  has **one** label (the pipeline's default ``function_to_apply`` without a ``problem_type``);
* labels are ``config.id2label``'s names; the sort is stable (equal scores keep label order);
  ``top_k`` keeps the first k, ``None`` keeps all.

Unlike the pipeline, an input longer than the model's positions is refused with a sentence.
``classify_details`` returns a :class:`ClassifyResult` with the logits and tokens for the UI.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from engine.model.loaded_model import LoadedModel
from engine.checks import is_int
from engine.probes.heads.head_inputs import batch_tensors, check_text, encode_pairs


@dataclass
class ClassifyResult:
    """The sequence-classification head's scores for one input, in label-id order."""

    text: str
    text_pair: str | None
    source: str                     # which model (LoadedModel.source)
    tokens: list[str]               # S pieces, specials included
    labels: list[str]               # id2label, by id
    logits: list[float]             # (num_labels,)
    scores: list[float]             # softmax of the logits (sigmoid for one label)
    function: str                   # "softmax" or "sigmoid"

    @property
    def best(self) -> int:
        """The id of the highest-scoring label (the first of equal ones)."""
        return max(range(len(self.scores)), key=lambda i: (self.scores[i], -i))

    def to_pipeline(self, top_k: int | None = None) -> list[dict[str, Any]]:
        """``[{"label", "score"}]`` best first (a stable sort), the first ``top_k`` or all."""
        rows = sorted(({"label": label, "score": score} for label, score in zip(self.labels, self.scores)),
                      key=lambda row: row["score"], reverse=True)
        return rows if top_k is None else rows[:top_k]


def classify(loaded: LoadedModel, text: str, text_pair: str | None = None,
             top_k: int | None = None) -> list[dict[str, Any]]:
    """Every label's score, best first: ``pipeline("text-classification", top_k=None)``'s output."""
    if top_k is not None and (not is_int(top_k) or top_k < 1):
        raise ValueError(f"top_k must be a whole number of at least 1 (or None for every label), got {top_k!r}")
    return classify_details(loaded, text, text_pair).to_pipeline(top_k)


def classify_details(loaded: LoadedModel, text: str, text_pair: str | None = None) -> ClassifyResult:
    """The :class:`ClassifyResult` for ``text`` (and ``text_pair``): logits, scores by label id, tokens.

    Raises ``ValueError`` without a sequence-classification head, for empty text, or too long an input.
    """
    loaded.require_head("classifier")
    check_text(text, "text", "write a sentence to classify")
    if text_pair is not None and not isinstance(text_pair, str):
        raise TypeError(f"text_pair must be a str or None, got {type(text_pair).__name__}")
    pair = text_pair if text_pair and text_pair.strip() else None
    encoding, = encode_pairs(loaded, [(text, pair)])
    inputs = batch_tensors(loaded, [encoding])                          # (1, S) each
    with torch.inference_mode():
        logits = loaded.model(**inputs, compute=("classifier",)).classifier.logits.float()[0]   # (num_labels,)
        single = logits.numel() == 1
        scores = logits.sigmoid() if single else logits.softmax(-1)     # (num_labels,)
    labels = [loaded.config.id2label.get(i, f"LABEL_{i}") for i in range(logits.numel())]
    return ClassifyResult(text=text, text_pair=pair, source=loaded.source, tokens=list(encoding.shown),
                          labels=labels, logits=logits.tolist(), scores=scores.tolist(),
                          function="sigmoid" if single else "softmax")
