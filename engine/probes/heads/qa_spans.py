"""Span scoring inside one QA window, exactly as ``transformers``' v4 ``QuestionAnsweringPipeline``
(``select_starts_ends`` and ``decode_spans``, docs/design/qa.md).

The arithmetic is float32 throughout, as the pipeline's numpy arrays are, and the top-k uses the
same numpy selection (``argmax`` for one candidate, ``argpartition`` then ``argsort`` for more),
so scores, ranks and even the order of exact ties equal the pipeline's on the same logits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from engine.checks import require_int

MASKED_LOGIT = np.float32(-10000.0)   # the pipeline's logit for tokens that cannot be in an answer
EXTRA_CANDIDATES = 10                 # with align_to_words the pipeline pre-selects 2 * top_k + 10 per window


@dataclass
class WindowSpans:
    """What `select_spans` finds in one window."""

    spans: list[tuple[int, int, float]]   # (start token, end token, score) in the pipeline's order
    null_score: float                     # p_start[0] * p_end[0] ([CLS]), before [CLS] is zeroed
    start_probs: np.ndarray               # (S,) float32, normalised, [CLS] not zeroed
    end_probs: np.ndarray                 # (S,)


def candidate_count(top_k: int, align_to_words: bool = True) -> int:
    """How many spans the pipeline takes from each window: ``2 * top_k + 10`` when it aligns to
    words (answers with equal text are merged afterwards, so it needs spares), else ``top_k``."""
    return 2 * top_k + EXTRA_CANDIDATES if align_to_words else top_k


def check_counts(top_k: int, max_answer_len: int) -> None:
    """The pipeline's checks on ``top_k`` and ``max_answer_len`` (ints >= 1)."""
    for name, value in (("top_k", top_k), ("max_answer_len", max_answer_len)):
        require_int(value, name, numpy_ints=True)
        if value < 1:
            raise ValueError(f"{name} parameter should be >= 1 (got {value})")


def _as_float32(values: Any, name: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    array = np.asarray(values, dtype=np.float32)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {array.shape}")
    return array


def _softmax(logits: np.ndarray) -> np.ndarray:
    """``exp(x - max) / sum`` in float32, as the pipeline normalises start and end logits."""
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


def _top(flat: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values, best first, chosen as the pipeline's ``decode_spans`` does.

    One candidate is numpy's ``argmax`` (the first maximum). More are an ``argpartition`` of the
    negated scores, sorted by ``argsort``; exact ties then come in numpy's order, as in the pipeline.
    When k is at least the number of cells, all cells are sorted (the pipeline sorts all when
    there are fewer, and fails when there are exactly k).
    """
    if k == 1:
        return np.array([int(np.argmax(flat))])
    if flat.size <= k:
        return np.argsort(-flat)
    chosen = np.argpartition(-flat, k)[:k]
    return chosen[np.argsort(-flat[chosen])]


def select_spans(start_logits: Sequence[float] | np.ndarray | torch.Tensor,
                 end_logits: Sequence[float] | np.ndarray | torch.Tensor,
                 p_mask: Sequence[int] | np.ndarray, top_k: int = 1, max_answer_len: int = 15,
                 attention_mask: Sequence[int] | np.ndarray | None = None) -> WindowSpans:
    """The ``top_k`` candidate spans of one window whose [CLS] is token 0, as the pipeline picks them.

    ``p_mask[i]`` is 1 where token i cannot be in an answer; ``attention_mask`` 0 marks padding.
    Masked logits become -10000 and start and end are normalised separately; the null score is
    p_start[0] * p_end[0]; then token 0's probabilities are set to 0. Span (i, j) scores
    p_start[i] * p_end[j] when i <= j and j - i < ``max_answer_len``, and 0 otherwise; the top_k
    cells are taken over all (i, j) and those whose ends are masked are dropped. Like the
    pipeline, this keeps zero-score cells (end before start, or at [CLS]) when fewer real spans exist.
    """
    check_counts(top_k, max_answer_len)
    start, end = _as_float32(start_logits, "start_logits"), _as_float32(end_logits, "end_logits")
    usable = 1 - np.asarray(p_mask, dtype=np.int64)                           # (S,) 1 = may be an endpoint
    if attention_mask is not None:
        usable = usable & np.asarray(attention_mask, dtype=np.int64)
    if not (start.shape == end.shape == usable.shape):
        raise ValueError(f"start_logits, end_logits and p_mask differ in length: "
                         f"{start.shape}, {end.shape}, {usable.shape}")
    blocked = usable == 0
    p_start = _softmax(np.where(blocked, MASKED_LOGIT, start))                 # (S,) float32
    p_end = _softmax(np.where(blocked, MASKED_LOGIT, end))
    null_score = float(p_start[0] * p_end[0])

    zeroed_start, zeroed_end = p_start.copy(), p_end.copy()
    zeroed_start[0] = zeroed_end[0] = 0.0                                      # [CLS] is never a real span end
    outer = zeroed_start[:, None] * zeroed_end[None, :]                        # (S, S): score of span (i, j)
    band = np.tril(np.triu(outer), max_answer_len - 1)                         # (S, S): i <= j < i + max_answer_len
    size = start.size
    order = _top(band.ravel(), top_k)                                          # (k,) flat indices, best first
    starts, ends = order // size, order % size
    endpoint = usable.astype(bool)
    endpoint[0] = True             # the pipeline tests membership in a 2-D nonzero(), whose row indices are all 0
    keep = endpoint[starts] & endpoint[ends]
    spans = [(int(i), int(j), float(band[i, j])) for i, j in zip(starts[keep], ends[keep])]
    return WindowSpans(spans, null_score, p_start, p_end)
