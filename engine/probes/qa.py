"""Extractive question answering with the Hugging Face QA pipeline's rules
(docs/ARCHITECTURE.md, "Extractive QA rules").

`select_spans` scores the spans of one window; `answer` / `answer_details` encode a
question and a context into ``doc_stride`` windows, run the QA head on all of them in one
batch, and merge the windows' spans exactly as ``transformers``' ``QuestionAnsweringPipeline``
(v4) does:

1. ``p_mask`` is 1 for every token that cannot be in an answer (question, [SEP], padding)
   and 0 for context tokens and for [CLS] (kept for the null score).
2. Start and end logits at p_mask-1 positions become -10000; each is normalised on its own
   with ``exp(x - max) / sum``. [CLS] stays in both denominators.
3. The null score is ``p_start[CLS] * p_end[CLS]`` (index 0); across windows, the minimum.
4. Then [CLS]'s probabilities are zeroed: it is never a span endpoint. A candidate (i, j)
   has both ends on allowed tokens, i <= j and j - i + 1 <= max_answer_len; its score is
   ``p_start[i] * p_end[j]``. Each window gives its top_k, best first (ties: smaller i, j).
5. Token spans become characters of the context: whole words (the first token's word start
   to the last token's word end, ``align_to_words``) or the tokens' own offsets.
6. All windows' answers are sorted by score (stable, window order on ties); with
   ``handle_impossible_answer`` the null answer ``{"score": null, "start": 0, "end": 0,
   "answer": ""}`` is appended before that sort (a span wins a tie); the first top_k stay.
   Like the pipeline, one answer comes back as a dict, more as a list; the same text can
   appear twice when found in two overlapping windows (``deduplicate=True`` drops repeats).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from engine.checkpoints.hf_format import LoadedModel
from engine.text.tokenizer import Encoding

MASKED_LOGIT = -10000.0        # the pipeline's value for tokens that cannot be in an answer
DEFAULT_MAX_SEQ_LEN = 384
DEFAULT_DOC_STRIDE = 128


@dataclass
class WindowSpans:
    """What `select_spans` finds in one window."""

    spans: list[tuple[int, int, float]]   # (start token, end token, score), best first, at most top_k
    null_score: float                     # p_start[CLS] * p_end[CLS]
    start_probs: np.ndarray               # (S,) normalised start probabilities ([CLS] not zeroed)
    end_probs: np.ndarray                 # (S,)


@dataclass
class QASpan:
    """One answer: pipeline fields plus where it came from (window and token positions)."""

    score: float
    start: int                 # character offsets into the context; answer = context[start:end]
    end: int
    answer: str
    window: int | None         # None for the null ("no answer") answer
    start_token: int | None    # positions within that window's tokens
    end_token: int | None

    @property
    def is_null(self) -> bool:
        return self.window is None

    def as_dict(self) -> dict[str, Any]:
        """The pipeline's shape: ``{"score", "start", "end", "answer"}``."""
        return {"score": self.score, "start": self.start, "end": self.end, "answer": self.answer}


@dataclass
class QAWindow:
    """One ``[CLS] question [SEP] context part [SEP]`` window and its probabilities."""

    index: int
    tokens: list[str]                      # the whole window, specials included
    sequence_ids: list[int | None]         # 0 question, 1 context, None specials
    offsets: list[tuple[int, int]]         # character spans in the question or the context
    context_positions: list[int]           # positions in `tokens` of the context tokens
    context_start: int                     # characters of the context this window covers
    context_end: int
    start_logits: list[float]              # per context token (order of context_positions)
    end_logits: list[float]
    start_probs: list[float]               # per context token, after masking and softmax
    end_probs: list[float]
    null_score: float                      # p_start[CLS] * p_end[CLS] in this window
    spans: list[QASpan] = field(default_factory=list)   # this window's top_k

    @property
    def context_tokens(self) -> list[str]:
        return [self.tokens[p] for p in self.context_positions]

    @property
    def context_offsets(self) -> list[tuple[int, int]]:
        return [self.offsets[p] for p in self.context_positions]


@dataclass
class QAResult:
    """Everything the QA tab shows for one question: answers, windows, null score, settings."""

    question: str
    context: str
    answers: list[dict[str, Any]]          # pipeline-shaped, best first, at most top_k
    spans: list[QASpan]                    # the same answers with their window and tokens
    windows: list[QAWindow]
    null_score: float                      # minimum over windows of p_start[CLS] * p_end[CLS]
    best_span_score: float                 # best non-null span score (0.0 if none)
    impossible: bool                       # handle_impossible_answer and the null answer came first
    question_tokens: list[str]             # as encoded (after max_question_len)
    question_truncated: bool
    top_k: int
    max_answer_len: int
    max_seq_len: int
    doc_stride: int
    max_question_len: int
    handle_impossible_answer: bool


def _as_1d(values: Any, name: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().double().numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {array.shape}")
    return array


def _check_counts(top_k: int, max_answer_len: int) -> None:
    for name, value in (("top_k", top_k), ("max_answer_len", max_answer_len)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} parameter should be >= 1 (got {value})")


def select_spans(start_logits: Sequence[float] | np.ndarray | torch.Tensor,
                 end_logits: Sequence[float] | np.ndarray | torch.Tensor,
                 p_mask: Sequence[int] | np.ndarray,
                 top_k: int = 1, max_answer_len: int = 15, handle_impossible_answer: bool = False,
                 attention_mask: Sequence[int] | np.ndarray | None = None, cls_index: int = 0) -> WindowSpans:
    """The top_k answer spans of one window under the pipeline's rules (module docstring).

    ``p_mask[i]`` is 1 where token i cannot be in an answer; ``attention_mask`` 0 marks
    padding. With ``handle_impossible_answer`` the null span ``(cls_index, cls_index,
    null_score)`` joins the ranking (after spans on ties), as the pipeline's postprocess does.
    """
    _check_counts(top_k, max_answer_len)
    start, end = _as_1d(start_logits, "start_logits"), _as_1d(end_logits, "end_logits")
    blocked = np.asarray(p_mask).astype(bool)
    if attention_mask is not None:
        blocked = blocked | ~np.asarray(attention_mask).astype(bool)
    if not (start.shape == end.shape == blocked.shape):
        raise ValueError(f"start_logits, end_logits and p_mask differ in length: "
                         f"{start.shape}, {end.shape}, {blocked.shape}")
    if not 0 <= cls_index < start.size:
        raise ValueError(f"cls_index {cls_index} is outside the window of {start.size} tokens")
    start = np.where(blocked, MASKED_LOGIT, start)
    end = np.where(blocked, MASKED_LOGIT, end)
    p_start = np.exp(start - start.max())
    p_start /= p_start.sum()
    p_end = np.exp(end - end.max())
    p_end /= p_end.sum()
    null_score = float(p_start[cls_index] * p_end[cls_index])

    allowed = ~blocked                                       # (S,)
    allowed[cls_index] = False                               # [CLS] is never a span endpoint
    size = start.size
    i, j = np.arange(size)[:, None], np.arange(size)[None, :]
    valid = allowed[:, None] & allowed[None, :] & (j >= i) & (j - i < max_answer_len)   # (S, S)
    scores = p_start[:, None] * p_end[None, :]               # (S, S): score of span (i, j)
    flat = np.flatnonzero(valid)                             # row-major: ties keep smaller i, then j
    order = flat[np.argsort(-scores.ravel()[flat], kind="stable")][:top_k]
    spans = [(int(k // size), int(k % size), float(scores.ravel()[k])) for k in order]
    if handle_impossible_answer:
        spans = sorted(spans + [(cls_index, cls_index, null_score)], key=lambda s: s[2], reverse=True)[:top_k]
    return WindowSpans(spans, null_score, p_start, p_end)


def _p_mask(window: Encoding, cls_token_id: int) -> list[int]:
    """1 for tokens that cannot be in an answer; context tokens and every [CLS] get 0."""
    return [0 if seq == 1 or tid == cls_token_id else 1 for seq, tid in zip(window.sequence_ids, window.input_ids)]


def _char_span(window: Encoding, s: int, e: int, align_to_words: bool) -> tuple[int, int]:
    """Token span (s, e) -> characters of the context: the words' extent, or the tokens' offsets."""
    if not align_to_words or window.word_ids[s] is None or window.word_ids[e] is None:
        return window.offsets[s][0], window.offsets[e][1]

    def word_chars(word: int) -> tuple[int, int]:  # tokenizers' word_to_chars within this window
        spans = [o for o, seq, w in zip(window.offsets, window.sequence_ids, window.word_ids)
                 if seq == 1 and w == word]
        return spans[0][0], spans[-1][1]

    return word_chars(window.word_ids[s])[0], word_chars(window.word_ids[e])[1]


def _check_inputs(question: Any, context: Any, top_k: int, max_answer_len: int) -> None:
    for name, value in (("question", question), ("context", context)):
        if value is None:
            raise ValueError(f"`{name}` cannot be None")
        if not isinstance(value, str):
            raise TypeError(f"`{name}` must be a str, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"`{name}` cannot be empty")
    _check_counts(top_k, max_answer_len)


def _lengths(loaded: LoadedModel, max_seq_len: int | None, doc_stride: int | None) -> tuple[int, int]:
    """The pipeline's defaults: max_seq_len min(384, model max), doc_stride min(max_seq_len // 2, 128)."""
    limit = loaded.config.max_position_embeddings
    if max_seq_len is None:
        max_seq_len = min(DEFAULT_MAX_SEQ_LEN, limit)
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or max_seq_len < 4:
        raise ValueError(f"max_seq_len must be an int >= 4, got {max_seq_len!r}")
    if max_seq_len > limit:
        raise ValueError(f"max_seq_len ({max_seq_len}) is larger than the model's "
                         f"max_position_embeddings ({limit})")
    if doc_stride is None:
        doc_stride = min(max_seq_len // 2, DEFAULT_DOC_STRIDE)
    if isinstance(doc_stride, bool) or not isinstance(doc_stride, int) or doc_stride < 0:
        raise ValueError(f"doc_stride must be an int >= 0, got {doc_stride!r}")
    if doc_stride >= max_seq_len:
        raise ValueError(f"`doc_stride` ({doc_stride}) is larger than `max_seq_len` ({max_seq_len}); "
                         f"it must be smaller")
    return max_seq_len, doc_stride


def _run_qa_head(loaded: LoadedModel, windows: list[Encoding]) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits (W, S) for all windows in one padded batch."""
    device = next(loaded.model.parameters()).device
    width = max(len(w.input_ids) for w in windows)
    pad = loaded.tokenizer.pad_token_id

    def padded(rows: list[list[int]], value: int) -> torch.Tensor:
        return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long, device=device)

    input_ids = padded([w.input_ids for w in windows], pad)                 # (W, S)
    attention_mask = padded([w.attention_mask for w in windows], 0)         # (W, S)
    token_type_ids = padded([w.token_type_ids for w in windows], 0)         # (W, S)
    with torch.inference_mode():
        span = loaded.model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                            compute=("qa",)).qa
    return span.start_logits.float().cpu().numpy(), span.end_logits.float().cpu().numpy()   # (W, S) each


def answer_details(loaded: LoadedModel, question: str, context: str, top_k: int = 1, max_answer_len: int = 15,
                   max_seq_len: int | None = None, doc_stride: int | None = None, max_question_len: int = 64,
                   handle_impossible_answer: bool = False, align_to_words: bool = True,
                   deduplicate: bool = False) -> QAResult:
    """Answer ``question`` from ``context`` and keep every window's probabilities for the UI.

    ``max_seq_len`` defaults to min(384, the model's max positions), ``doc_stride`` to
    min(max_seq_len // 2, 128), as in the pipeline. Raises ValueError on empty inputs,
    top_k or max_answer_len < 1, impossible lengths, or a model without a QA head.
    """
    _check_inputs(question, context, top_k, max_answer_len)
    loaded.require_head("qa")
    if loaded.tokenizer is None:
        raise ValueError(f"this model has no tokenizer ({loaded.source}); cannot answer questions")
    max_seq_len, doc_stride = _lengths(loaded, max_seq_len, doc_stride)
    encodings = loaded.tokenizer.encode_qa_windows(question, context, max_seq_len, doc_stride, max_question_len)
    if not any(seq == 0 for seq in encodings[0].sequence_ids):
        raise ValueError("the question has no tokens after normalisation (only control or zero-width "
                         "characters?); type a question with words")
    if not any(seq == 1 for seq in encodings[0].sequence_ids):
        raise ValueError("the context has no tokens after normalisation; give a context with text")
    start_logits, end_logits = _run_qa_head(loaded, encodings)                    # (W, S) each

    windows: list[QAWindow] = []
    spans: list[QASpan] = []
    for index, window in enumerate(encodings):
        length = len(window.input_ids)
        found = select_spans(start_logits[index, :length], end_logits[index, :length],
                             _p_mask(window, loaded.tokenizer.cls_token_id), top_k, max_answer_len)
        window_spans = []
        for s, e, score in found.spans:
            start, end = _char_span(window, s, e, align_to_words)
            window_spans.append(QASpan(score, start, end, context[start:end], index, s, e))
        positions = [p for p, seq in enumerate(window.sequence_ids) if seq == 1]
        windows.append(QAWindow(
            index=index, tokens=window.tokens, sequence_ids=window.sequence_ids, offsets=window.offsets,
            context_positions=positions, context_start=window.offsets[positions[0]][0],
            context_end=window.offsets[positions[-1]][1],
            start_logits=[float(start_logits[index, p]) for p in positions],
            end_logits=[float(end_logits[index, p]) for p in positions],
            start_probs=[float(found.start_probs[p]) for p in positions],
            end_probs=[float(found.end_probs[p]) for p in positions],
            null_score=found.null_score, spans=window_spans,
        ))
        spans.extend(window_spans)

    null_score = min(w.null_score for w in windows)
    best_span_score = max((s.score for s in spans), default=0.0)
    if handle_impossible_answer:
        spans.append(QASpan(null_score, 0, 0, "", None, None, None))
    spans = sorted(spans, key=lambda s: s.score, reverse=True)                  # stable: window order on ties
    if deduplicate:
        unique: dict[tuple[int, int], QASpan] = {}
        for span in spans:
            unique.setdefault((span.start, span.end), span)   # keeps the best of each character span
        spans = list(unique.values())
    spans = spans[:top_k]
    question_ids = [p for p, seq in enumerate(encodings[0].sequence_ids) if seq == 0]
    return QAResult(
        question=question, context=context, answers=[s.as_dict() for s in spans], spans=spans, windows=windows,
        null_score=null_score, best_span_score=best_span_score, impossible=bool(spans) and spans[0].is_null,
        question_tokens=[encodings[0].tokens[p] for p in question_ids],
        question_truncated=len(question_ids) < len(loaded.tokenizer.backend.encode(
            question, add_special_tokens=False).ids),
        top_k=top_k, max_answer_len=max_answer_len, max_seq_len=max_seq_len, doc_stride=doc_stride,
        max_question_len=max_question_len, handle_impossible_answer=handle_impossible_answer,
    )


def answer(loaded: LoadedModel, question: str, context: str, top_k: int = 1, max_answer_len: int = 15,
           max_seq_len: int | None = None, doc_stride: int | None = None, max_question_len: int = 64,
           handle_impossible_answer: bool = False, align_to_words: bool = True,
           deduplicate: bool = False) -> dict[str, Any] | list[dict[str, Any]]:
    """The pipeline's output: ``{"score", "start", "end", "answer"}``, or a list of them best first.

    As ``transformers``' pipeline, a single answer (always the case with top_k=1) comes
    back as a dict, several as a list. Arguments as `answer_details`.
    """
    answers = answer_details(loaded, question, context, top_k, max_answer_len, max_seq_len, doc_stride,
                             max_question_len, handle_impossible_answer, align_to_words, deduplicate).answers
    return answers[0] if len(answers) == 1 else answers
