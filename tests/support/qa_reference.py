"""A reference for extractive QA: the rules of ``transformers`` 4.x ``QuestionAnsweringPipeline``
(v4.54 to v4.57, fast tokenizer), written from its source for these tests. transformers 5 has no
QA pipeline, so the tests run this on the logits our model produced and on windows and word
alignment from ``transformers``' own fast tokenizer.

- ``reference_select``: the pipeline's ``select_starts_ends`` + ``decode_spans`` on one window,
  on a (1, S) float32 batch as the pipeline holds it.
- ``reference_postprocess``: its ``postprocess``: per-window candidates (``2 * top_k + 10`` when
  aligning to words), ``get_indices``, the merge of equal texts, the null answer, sort, top_k.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

PIPELINE_NULL_START = 1_000_000.0


def reference_select(start_logits: Sequence[float], end_logits: Sequence[float], p_mask: Sequence[int], k: int,
                     max_answer_len: int, attention_mask: Sequence[int] | None = None
                     ) -> tuple[list[tuple[int, int, float]], float]:
    """(start, end, score) candidates in the pipeline's order, and this window's null score."""
    can_answer = 1 - np.array([p_mask])                                # (1, S); 1 where a span may end
    if attention_mask is not None:
        can_answer = can_answer & np.array([attention_mask])
    masked = can_answer == 0
    probs = []
    for logits in (start_logits, end_logits):
        x = np.where(masked, -10000.0, np.array([logits], dtype=np.float32))   # stays float32 (1, S)
        x = np.exp(x - x.max(axis=-1, keepdims=True))
        probs.append(x / x.sum())
    p_start, p_end = probs
    null = (p_start[0, 0] * p_end[0, 0]).item()
    p_start[0, 0] = 0.0
    p_end[0, 0] = 0.0
    grid = np.matmul(p_start[:, :, None], p_end[:, None, :])             # (1, S, S)
    grid = np.tril(np.triu(grid), max_answer_len - 1)                    # end >= start, short enough
    flat = grid.reshape(-1)
    if k == 1:
        picked = np.array([flat.argmax()])
    elif flat.size < k:
        picked = np.argsort(-flat)
    else:
        some = np.argpartition(-flat, k)[:k]
        picked = some[np.argsort(-flat[some])]
    _, starts, ends = np.unravel_index(picked, grid.shape)
    allowed = can_answer.nonzero()                                       # (rows, columns) of a 2-D array
    ok = np.isin(starts, allowed) & np.isin(ends, allowed)
    return [(int(s), int(e), float(grid[0, s, e])) for s, e in zip(starts[ok], ends[ok])], null


def brute_force(start_logits: Sequence[float], end_logits: Sequence[float], p_mask: Sequence[int],
                max_answer_len: int) -> tuple[list[tuple[int, int, float]], float]:
    """Every legal span by plain loops in float64, best first (the rules, without numpy's selection)."""
    n = len(start_logits)
    blocked = [bool(m) for m in p_mask]
    s = [-10000.0 if blocked[i] else float(start_logits[i]) for i in range(n)]
    e = [-10000.0 if blocked[i] else float(end_logits[i]) for i in range(n)]
    ps = [np.exp(x - max(s)) for x in s]
    pe = [np.exp(x - max(e)) for x in e]
    ps, pe = [x / sum(ps) for x in ps], [x / sum(pe) for x in pe]
    spans = [(i, j, ps[i] * pe[j]) for i in range(1, n) for j in range(i, min(n, i + max_answer_len))
             if not blocked[i] and not blocked[j]]
    return sorted(spans, key=lambda t: -t[2]), ps[0] * pe[0]


def hf_p_mask(encoding: Any, cls_token_id: int) -> list[int]:
    """The pipeline's p_mask: 1 unless a token is in the context (sequence 1); every [CLS] gets 0."""
    return [0 if seq == 1 or tid == cls_token_id else 1 for seq, tid in zip(encoding.sequence_ids, encoding.ids)]


def hf_char_span(encoding: Any, s: int, e: int, align_to_words: bool) -> tuple[int, int]:
    """The pipeline's ``get_indices`` with tokenizers' own Encoding (words, else offsets)."""
    if align_to_words:
        try:
            return (encoding.word_to_chars(encoding.token_to_word(s), sequence_index=1)[0],
                    encoding.word_to_chars(encoding.token_to_word(e), sequence_index=1)[1])
        except Exception:  # noqa: BLE001 - the pipeline falls back to offsets on any failure
            pass
    return encoding.offsets[s][0], encoding.offsets[e][1]


def reference_postprocess(encodings: list[Any], logits: list[tuple[Sequence[float], Sequence[float]]], context: str,
                          cls_token_id: int, top_k: int = 1, max_answer_len: int = 15,
                          handle_impossible_answer: bool = False, align_to_words: bool = True
                          ) -> dict[str, Any] | list[dict[str, Any]]:
    """The pipeline's answers for windows ``encodings`` (tokenizers Encodings) and their logits."""
    k = 2 * top_k + 10 if align_to_words else top_k
    null = PIPELINE_NULL_START
    answers: list[dict[str, Any]] = []
    for encoding, (start, end) in zip(encodings, logits):
        candidates, window_null = reference_select(start, end, hf_p_mask(encoding, cls_token_id), k, max_answer_len)
        if handle_impossible_answer:
            null = min(null, window_null)
        for s, e, score in candidates:
            a, b = hf_char_span(encoding, s, e, align_to_words)
            text = context[a:b]
            same = [x for x in answers if x["answer"].lower() == text.lower()]
            if same:
                same[0]["score"] += score
            else:
                answers.append({"score": score, "start": a, "end": b, "answer": text})
    if handle_impossible_answer:
        answers.append({"score": null, "start": 0, "end": 0, "answer": ""})
    answers = sorted(answers, key=lambda x: x["score"], reverse=True)[:top_k]
    return answers[0] if len(answers) == 1 else answers
