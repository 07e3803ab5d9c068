"""Extractive question answering, exactly as ``transformers``' v4 ``QuestionAnsweringPipeline``
with a fast tokenizer (docs/design/qa.md).

`answer` / `answer_details` encode ``[CLS] question [SEP] context part [SEP]`` windows, by the
tokenizer's roles and post-processor (RoBERTa's ``<s> question </s></s> context part </s>``; the
context alone is truncated, consecutive windows share ``doc_stride`` context tokens, the
question is never cut; window lengths, their defaults and the longest question as the pipeline's:
`engine.probes.heads.qa_lengths`; at most ``config.max_tokens`` tokens; segment ids only as transformers
passes them, ``segment_ids.uses_segment_ids``), run the QA head on all windows in one batch, pick each window's
candidates with `engine.probes.heads.qa_spans.select_spans` and merge them as the pipeline's
``postprocess`` does:

1. Each window gives ``2 * top_k + 10`` candidates (``top_k`` without ``align_to_words``).
2. A candidate becomes characters of the context: whole words (the words' extent within that
   window) or, without ``align_to_words`` or for a token without a word, the tokens' offsets.
3. Window by window, a candidate whose text equals an earlier answer's, ignoring case, adds its
   score to that answer (which keeps its own text and offsets); otherwise it is a new answer.
4. With ``handle_impossible_answer`` the null answer ``{"score": min over windows of
   p_start[CLS] * p_end[CLS], "start": 0, "end": 0, "answer": ""}`` is appended last.
5. A stable sort by score (earlier answers win ties, so spans beat the null answer) and the
   first ``top_k`` stay. One answer comes back as a dict, several as a list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.qa_lengths import check_question_fits, pair_specials, window_lengths
from engine.probes.heads.qa_spans import candidate_count, check_counts, select_spans
from engine.text.encoding import Encoding
from engine.text.qa_windows import encode_qa_windows
from engine.text.segment_ids import uses_segment_ids


@dataclass
class QASpan:
    """One answer: pipeline fields plus where it was first found (window and token positions), and what the
    UI shows of it: its own probability (its best candidate's, at most 1) and every place it was found."""

    score: float               # the pipeline's: summed over every candidate with the same text (ignoring case)
    start: int                 # character offsets into the context; answer = context[start:end]
    end: int
    answer: str
    window: int | None         # None for the null ("no answer") answer
    start_token: int | None    # positions within that window's tokens
    end_token: int | None
    merged: int = 1            # how many candidates (over all windows) share this text
    # Filled from the fields above when not given; `merge_candidates` updates them as candidates join.
    probability: float | None = None       # the best candidate's own p_start * p_end in its window (<= 1)
    best_window: int | None = None         # that candidate's window and token positions
    best_start_token: int | None = None
    best_end_token: int | None = None
    places: list[tuple[int, int]] = field(default_factory=list)   # distinct (start, end) characters, in text order
    windows: list[int] = field(default_factory=list)              # each merged candidate's window, in order

    def __post_init__(self) -> None:
        if self.probability is None:
            self.probability = self.score
        if self.window is not None and not self.places:
            self.best_window, self.best_start_token, self.best_end_token = self.window, self.start_token, self.end_token
            self.places, self.windows = [(self.start, self.end)], [self.window]

    @property
    def is_null(self) -> bool:
        return self.window is None

    def note(self, candidate: QASpan) -> None:
        """Keep what the pipeline's sum forgets of ``candidate`` (a later candidate with the same text, ignoring
        case): its window, its place in the text, and its probability when it is the best so far."""
        self.windows.append(candidate.window)
        if (candidate.start, candidate.end) not in self.places:
            self.places = sorted([*self.places, (candidate.start, candidate.end)])
        if candidate.score > self.probability:
            self.probability, self.best_window = candidate.score, candidate.window
            self.best_start_token, self.best_end_token = candidate.start_token, candidate.end_token

    def as_dict(self) -> dict[str, Any]:
        """The pipeline's shape: ``{"score", "start", "end", "answer"}``."""
        return {"score": self.score, "start": self.start, "end": self.end, "answer": self.answer}


@dataclass
class QAWindow:
    """One ``[CLS] question [SEP] context part [SEP]`` window (by the tokenizer's layout) and its probabilities."""

    index: int
    tokens: list[str]                      # the whole window, specials included
    sequence_ids: list[int | None]         # 0 question, 1 context, None specials
    offsets: list[tuple[int, int]]         # character spans in the question or the context
    context_positions: list[int]           # positions in `tokens` of the context tokens
    context_start: int                     # characters of the context this window covers
    context_end: int
    logits: tuple[list[float], list[float]]   # (start, end) logits of every token of the window
    p_mask: list[int]                      # 1 where a token cannot be in an answer
    start_logits: list[float]              # per context token (order of context_positions)
    end_logits: list[float]
    start_probs: list[float]               # per context token, after masking and softmax
    end_probs: list[float]
    null_score: float                      # p_start[CLS] * p_end[CLS] in this window
    candidates: list[QASpan] = field(default_factory=list)   # this window's candidates, before merging

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
    best_span_score: float                 # best merged non-null answer (0.0 if none), a sum over windows
    impossible: bool                       # handle_impossible_answer and the null answer came first
    question_tokens: list[str]
    top_k: int
    max_answer_len: int
    max_seq_len: int
    doc_stride: int
    handle_impossible_answer: bool
    align_to_words: bool = True
    best_span_probability: float = 0.0     # that answer's own probability: its best candidate's (<= 1)

    @property
    def prefers_null(self) -> bool:
        """The null score beats the best span (whether or not the null answer may compete)."""
        return self.null_score > self.best_span_score


def _p_mask(window: Encoding, cls_token_id: int) -> list[int]:
    """1 for tokens that cannot be in an answer; context tokens and every cls-role token ([CLS], <s>) get 0."""
    return [0 if seq == 1 or tid == cls_token_id else 1 for seq, tid in zip(window.sequence_ids, window.input_ids)]


def _char_span(window: Encoding, s: int, e: int, align_to_words: bool) -> tuple[int, int]:
    """Token span (s, e) -> characters of the context, as the pipeline's ``get_indices``: the words'
    extent within this window, or the tokens' own offsets (no alignment, or a token without a word)."""
    if not align_to_words or window.word_ids[s] is None or window.word_ids[e] is None:
        return window.offsets[s][0], window.offsets[e][1]

    def word_chars(word: int) -> list[tuple[int, int]]:   # tokenizers' word_to_chars(word, sequence_index=1)
        return [o for o, seq, w in zip(window.offsets, window.sequence_ids, window.word_ids) if seq == 1 and w == word]

    first, last = word_chars(window.word_ids[s]), word_chars(window.word_ids[e])
    if not first or not last:                               # a word of the question: the pipeline falls back too
        return window.offsets[s][0], window.offsets[e][1]
    return first[0][0], last[-1][1]


def _check_inputs(question: Any, context: Any, top_k: int, max_answer_len: int) -> None:
    for name, value in (("question", question), ("context", context)):
        if value is None:
            raise ValueError(f"`{name}` cannot be None")
        if not isinstance(value, str):
            raise TypeError(f"`{name}` must be a str, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"`{name}` cannot be empty")
    check_counts(top_k, max_answer_len)


def _run_qa_head(loaded: LoadedModel, windows: list[Encoding]) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits (W, S) for all windows in one padded batch."""
    device = next(loaded.model.parameters()).device
    width = max(len(w.input_ids) for w in windows)
    pad = loaded.tokenizer.pad_token_id

    def padded(rows: list[list[int]], value: int) -> torch.Tensor:
        return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long, device=device)

    input_ids = padded([w.input_ids for w in windows], pad)                 # (W, S)
    attention_mask = padded([w.attention_mask for w in windows], 0)         # (W, S)
    token_type_ids = (padded([w.token_type_ids for w in windows], 0)        # (W, S); none without segments
                      if uses_segment_ids(loaded.config, loaded.tokenizer) else None)
    with torch.inference_mode():
        span = loaded.model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                            compute=("qa",)).qa
    return span.start_logits.float().cpu().numpy(), span.end_logits.float().cpu().numpy()   # (W, S) each


def _window(index: int, encoding: Encoding, context: str, start_logits: np.ndarray, end_logits: np.ndarray,
            p_mask: list[int], pre_k: int, max_answer_len: int, align_to_words: bool) -> QAWindow:
    """Score one window's candidates and keep what the UI shows of it."""
    found = select_spans(start_logits, end_logits, p_mask, pre_k, max_answer_len)
    candidates = []
    for s, e, score in found.spans:
        start, end = _char_span(encoding, s, e, align_to_words)
        candidates.append(QASpan(score, start, end, context[start:end], index, s, e))
    positions = [p for p, seq in enumerate(encoding.sequence_ids) if seq == 1]
    return QAWindow(
        index=index, tokens=encoding.shown, sequence_ids=encoding.sequence_ids, offsets=encoding.offsets,
        context_positions=positions, context_start=encoding.offsets[positions[0]][0],
        context_end=encoding.offsets[positions[-1]][1],
        logits=([float(x) for x in start_logits], [float(x) for x in end_logits]), p_mask=p_mask,
        start_logits=[float(start_logits[p]) for p in positions], end_logits=[float(end_logits[p]) for p in positions],
        start_probs=[float(found.start_probs[p]) for p in positions],
        end_probs=[float(found.end_probs[p]) for p in positions], null_score=found.null_score, candidates=candidates)


def merge_candidates(windows: list[QAWindow]) -> list[QASpan]:
    """All windows' candidates, window by window; equal texts (ignoring case) add their scores into
    the first such answer, which keeps its text and offsets (the pipeline's ``get_answer``)."""
    merged: dict[str, QASpan] = {}
    for window in windows:
        for c in window.candidates:
            known = merged.get(c.answer.lower())
            if known is None:
                merged[c.answer.lower()] = QASpan(c.score, c.start, c.end, c.answer, c.window, c.start_token,
                                                  c.end_token)
            else:
                known.score += c.score
                known.merged += 1
                known.note(c)
    return list(merged.values())


def answer_details(loaded: LoadedModel, question: str, context: str, top_k: int = 1, max_answer_len: int = 15,
                   max_seq_len: int | None = None, doc_stride: int | None = None,
                   handle_impossible_answer: bool = False, align_to_words: bool = True) -> QAResult:
    """Answer ``question`` from ``context`` and keep every window's probabilities for the UI.

    ``max_seq_len`` defaults to min(384, the model's max positions), ``doc_stride`` to
    min(max_seq_len // 2, 128), as in the pipeline. Raises ValueError on empty inputs,
    top_k or max_answer_len < 1, impossible lengths (`QuestionTooLong` for a question that
    leaves no room for the context), or a model without a QA head.
    """
    _check_inputs(question, context, top_k, max_answer_len)
    loaded.require_head("qa")
    backend = loaded.require_tokenizer("so it cannot answer questions").backend
    max_seq_len, doc_stride = window_lengths(loaded, max_seq_len, doc_stride)
    num_question = len(backend.encode(question, add_special_tokens=False).ids)
    if num_question == 0:
        raise ValueError("the question has no tokens after normalisation (only control or zero-width "
                         "characters?); type a question with words")
    num_context = len(backend.encode(context, add_special_tokens=False).ids)
    if num_context == 0:
        raise ValueError("the context has no tokens after normalisation; give a context with text")
    check_question_fits(num_question, num_context, max_seq_len, doc_stride, pair_specials(loaded.tokenizer))
    encodings = encode_qa_windows(loaded.tokenizer, question, context, max_seq_len, doc_stride,
                                  max_question_len=num_question)                  # never cut, as the pipeline
    start_logits, end_logits = _run_qa_head(loaded, encodings)                    # (W, S) each
    return answer_from_logits(loaded, question, context, encodings,
                              [start_logits[i, :len(enc.input_ids)] for i, enc in enumerate(encodings)],
                              [end_logits[i, :len(enc.input_ids)] for i, enc in enumerate(encodings)],
                              top_k, max_answer_len, max_seq_len, doc_stride, handle_impossible_answer,
                              align_to_words)


def answer_from_logits(loaded: LoadedModel, question: str, context: str, encodings: list[Encoding],
                       start_logits: list[np.ndarray], end_logits: list[np.ndarray], top_k: int,
                       max_answer_len: int, max_seq_len: int, doc_stride: int,
                       handle_impossible_answer: bool = False, align_to_words: bool = True) -> QAResult:
    """``answer_details``'s result from windows whose logits are known (one ``(S_w,)`` start and end array per
    window of ``encodings``), with no model run: each window's spans, merged across windows and ranked. The
    explorer keeps a first call's logits and answers a *Top-k* or *Max answer length* change with this."""
    if not len(encodings) == len(start_logits) == len(end_logits):
        raise ValueError(f"{len(encodings)} windows but {len(start_logits)} / {len(end_logits)} logit rows")
    pre_k = candidate_count(top_k, align_to_words)
    windows = [_window(i, enc, context, start_logits[i], end_logits[i], _p_mask(enc, loaded.tokenizer.cls_token_id),
                       pre_k, max_answer_len, align_to_words)
               for i, enc in enumerate(encodings)]

    spans = merge_candidates(windows)
    null_score = min(w.null_score for w in windows)
    best_span_score = max((s.score for s in spans), default=0.0)
    best_span_probability = next((s.probability for s in spans if s.score == best_span_score), 0.0)
    if handle_impossible_answer:
        spans.append(QASpan(null_score, 0, 0, "", None, None, None))
    spans = sorted(spans, key=lambda s: s.score, reverse=True)[:top_k]          # stable: earlier first on ties
    return QAResult(
        question=question, context=context, answers=[s.as_dict() for s in spans], spans=spans, windows=windows,
        null_score=null_score, best_span_score=best_span_score, impossible=bool(spans) and spans[0].is_null,
        question_tokens=[t for t, seq in zip(encodings[0].shown, encodings[0].sequence_ids) if seq == 0],
        top_k=top_k, max_answer_len=max_answer_len, max_seq_len=max_seq_len, doc_stride=doc_stride,
        handle_impossible_answer=handle_impossible_answer, align_to_words=align_to_words,
        best_span_probability=best_span_probability,
    )


def answer(loaded: LoadedModel, question: str, context: str, top_k: int = 1, max_answer_len: int = 15,
           max_seq_len: int | None = None, doc_stride: int | None = None, handle_impossible_answer: bool = False,
           align_to_words: bool = True) -> dict[str, Any] | list[dict[str, Any]]:
    """The pipeline's output: ``{"score", "start", "end", "answer"}``, or a list of them best first.

    As ``transformers``' pipeline, a single answer comes back as a dict, several as a list.
    Arguments as `answer_details`.
    """
    answers = answer_details(loaded, question, context, top_k, max_answer_len, max_seq_len, doc_stride,
                             handle_impossible_answer, align_to_words).answers
    return answers[0] if len(answers) == 1 else answers
