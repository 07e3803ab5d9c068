"""Extractive-QA training features from SQuAD v1.1-format JSON, as Hugging Face's ``run_qa.py`` builds them.

Each question is encoded with its context in windows of the tokenizer's pair template (BERT's
``[CLS] question [SEP] context-window [SEP]``, RoBERTa's ``<s> question </s></s> context-window </s>``:
``engine.text.qa_windows.encode_qa_windows``; the context alone is truncated, windows overlap by ``doc_stride``
tokens, the question is cut to ``max_question_len`` by ``cut_question``: the very windows the QA pipeline
scores). A window leaves room for as many special tokens as the template adds (``num_special_tokens``: 3 for
BERT, 4 for RoBERTa). A feature's second segment starts at the context's first token (its sequence ids);
it is marked in the type ids unless the tokenizer's layout takes none (RoBERTa's and XLM-R's ``</s></s>``,
to which transformers passes none: ``segment_ids.separated_once``). The first answer's character span becomes
token positions in every window: the last context token starting at or before the answer's first character
and the first context token ending at or after its last one. A window that does not hold the whole answer
(and an impossible SQuAD 2.0 question) is labelled start = end = 0, the template's first token.

Answers whose ``answer_start`` does not point at their ``text`` in the context are skipped
(and counted); a question left without answers is dropped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tokenizers import Tokenizer

from engine.checks import is_int
from engine.data.data_files import read_data_text
from engine.data.features import FeatureDataset, second_text_start
from engine.text.qa_windows import cut_question
from engine.text.segment_ids import separated_once
from engine.text.tokenizer import WordPieceTokenizer


@dataclass
class QAExample:
    """One question about one context, with its valid answers as (text, character start)."""

    id: str
    question: str
    context: str
    answers: list[tuple[str, int]]
    title: str = ""
    is_impossible: bool = False

    @property
    def answer_span(self) -> tuple[int, int] | None:
        """Character span [start, end) of the first answer (the one trained on); None if impossible."""
        if not self.answers or self.is_impossible:
            return None
        text, start = self.answers[0]
        return start, start + len(text)


@dataclass
class SquadData:
    """The usable questions of a SQuAD file, and what was left out."""

    examples: list[QAExample]
    skipped_answers: int = 0                 # answer_start does not match the answer text
    dropped_questions: int = 0               # questions left with no valid answer
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.examples)} questions; skipped {self.skipped_answers} answer(s) whose answer_start "
                f"does not match the text, dropped {self.dropped_questions} question(s) left without an answer")


def read_squad(path: str | Path, max_bytes: int | None = None) -> SquadData:
    """Read a SQuAD v1.1 or v2.0 JSON file; ``ValueError`` names what is wrong with it (over
    ``max_bytes``, empty, not UTF-8, not JSON, not SQuAD's layout)."""
    path = Path(path)
    text = read_data_text(path, max_bytes, "SQuAD JSON file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path} is not SQuAD JSON: expected {{\"data\": [{{\"title\", \"paragraphs\": ...}}]}}")
    result = SquadData([])
    for a, article in enumerate(data["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ValueError(f"{path}: data[{a}] has no list of \"paragraphs\"")
        for p, paragraph in enumerate(paragraphs):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str) \
                    or not isinstance(paragraph.get("qas"), list):
                raise ValueError(f"{where} needs a \"context\" string and a \"qas\" list")
            for q, qa in enumerate(paragraph["qas"]):
                example = _read_question(qa, paragraph["context"], str(article.get("title", "")), f"{where}.qas[{q}]",
                                         result)
                if example is not None:
                    result.examples.append(example)
    return result


def _read_question(qa: Any, context: str, title: str, where: str, result: SquadData) -> QAExample | None:
    if not isinstance(qa, dict) or not isinstance(qa.get("question"), str) or not isinstance(qa.get("answers"), list):
        raise ValueError(f"{where} needs a \"question\" string and an \"answers\" list")
    if not qa["question"].strip() or not context.strip():
        result.dropped_questions += 1
        return None
    impossible = bool(qa.get("is_impossible", False))
    answers = []
    for answer in qa["answers"]:
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) \
                or not is_int(answer.get("answer_start")):
            raise ValueError(f"{where}: every answer needs \"text\" (a string) and \"answer_start\" (an integer)")
        text, start = answer["text"], answer["answer_start"]
        if text.strip() and 0 <= start and context[start:start + len(text)] == text:
            answers.append((text, start))
        else:
            result.skipped_answers += 1
    if not answers and not impossible:
        result.dropped_questions += 1
        return None
    return QAExample(str(qa.get("id", where)), qa["question"].lstrip(), context, answers, title, impossible)


def _label(offsets: Sequence[tuple[int, int]], sequence_ids: Sequence[int | None],
           span: tuple[int, int] | None) -> tuple[int, int]:
    """Token (start, end) of the character ``span`` [start, end) in a window (its ``offsets`` and ``sequence_ids``);
    (0, 0), the no-answer label, when the span is not all inside the window's context or there is none."""
    context = [i for i, seq in enumerate(sequence_ids) if seq == 1]
    if span is None or not context:
        return 0, 0
    start_char, end_char = span
    if not (offsets[context[0]][0] <= start_char and offsets[context[-1]][1] >= end_char):
        return 0, 0
    start = max(i for i in context if offsets[i][0] <= start_char)
    end = min(i for i in context if offsets[i][1] >= end_char)
    return start, max(start, end)


def check_lengths(max_seq_len: int, doc_stride: int, max_question_len: int, specials: int) -> None:
    """``ValueError`` unless every question fits with room for a context window longer than the stride;
    ``specials``: the special tokens of a window, the tokenizer's ``num_special_tokens(pair=True)`` (BERT's 3,
    RoBERTa's 4; 0 checks what holds for any template, before the tokenizer is known)."""
    room = max_seq_len - max_question_len - specials
    if max_question_len < 1 or doc_stride < 0:
        raise ValueError(f"max_question_len must be >= 1 and doc_stride >= 0, got {max_question_len}, {doc_stride}")
    if room <= doc_stride:
        less = f" - {specials} special tokens of the tokenizer's pair template" if specials else ""
        raise ValueError(f"doc_stride ({doc_stride}) must be smaller than the context room of a window: "
                         f"max_seq_len {max_seq_len} - max_question_len {max_question_len}{less} = {room}")


class QAFeatureDataset(FeatureDataset):
    """QA windows (layout "span") that keep their questions and how they were cut: ``examples[i]`` owns the
    features whose ``example_index`` is i, so held-out answers can be scored as texts
    (``engine.training.tasks.squad_evaluation``)."""

    def __init__(self, rows: Sequence[np.ndarray], segment_starts: Sequence[int], targets: np.ndarray,
                 max_seq_length: int, batch_size: int, pad_token_id: int, seed: int, shuffle: bool,
                 example_index: Sequence[int], *, examples: list[QAExample], doc_stride: int,
                 max_question_len: int, segment_ids: bool = True) -> None:
        super().__init__("span", rows, segment_starts, targets, max_seq_length, batch_size, pad_token_id, seed,
                         shuffle, example_index, segment_ids)
        self.examples, self.doc_stride, self.max_question_len = examples, doc_stride, max_question_len

    def questions_of_first(self, features: int) -> list[QAExample]:
        """The questions owning the first ``features`` features (in feature order; unshuffled data)."""
        owners = dict.fromkeys(int(i) for i in self.example_index[:features])
        return [self.examples[i] for i in owners]


def build_qa_dataset(examples: Sequence[QAExample], tokenizer: WordPieceTokenizer, max_seq_len: int,
                     batch_size: int, doc_stride: int = 128, max_question_len: int = 64, seed: int = 0,
                     shuffle: bool = True, progress: Callable[[int, int], None] | None = None,
                     chunk: int = 2000, segment_ids: bool | None = None) -> FeatureDataset:
    """All windows of all questions as a ``FeatureDataset`` (layout "span"); features keep the index
    of their question (``example_index``). ``progress(done, total)`` follows every ``chunk`` questions.
    ``segment_ids`` (default: the tokenizer's pair layout takes them) marks the context in the type ids.

    The windows are ``encode_qa_windows``'s (a test holds them equal), encoded ``chunk``
    questions at a time with the library's batch encoder: one pass over each context, in parallel.
    """
    check_lengths(max_seq_len, doc_stride, max_question_len, tokenizer.num_special_tokens(True))
    if not examples:
        raise ValueError("no questions to build QA features from")
    backend = tokenizer.backend
    windowed = Tokenizer.from_str(backend.to_str())      # a private copy: truncation is a tokenizer setting
    windowed.no_padding()
    windowed.enable_truncation(max_seq_len, stride=doc_stride, strategy="only_second")
    rows: list[np.ndarray] = []
    segments: list[int] = []
    targets: list[tuple[int, int]] = []
    owners: list[int] = []
    for first in range(0, len(examples), chunk):
        part = examples[first:first + chunk]
        questions = [e.question for e in part]
        for i, asked in enumerate(backend.encode_batch(questions, add_special_tokens=False)):
            if len(asked.ids) > max_question_len:      # cut at a piece's end, as encode_qa_windows
                questions[i] = cut_question(tokenizer, questions[i], max_question_len)
        encoded = windowed.encode_batch(list(zip(questions, [e.context for e in part])))
        for offset, (example, whole) in enumerate(zip(part, encoded)):
            span = example.answer_span
            for window in (whole, *whole.overflowing):
                rows.append(np.asarray(window.ids, dtype=np.int32))
                segments.append(second_text_start(window.sequence_ids))
                targets.append(_label(window.offsets, window.sequence_ids, span))
                owners.append(first + offset)
        if progress is not None:
            progress(min(first + chunk, len(examples)), len(examples))
    return QAFeatureDataset(rows, segments, np.asarray(targets, dtype=np.int64), max_seq_len, batch_size,
                            tokenizer.pad_token_id, seed, shuffle, owners, examples=list(examples),
                            doc_stride=doc_stride, max_question_len=max_question_len,
                            segment_ids=separated_once(tokenizer) if segment_ids is None else segment_ids)
