"""A question and its context as the QA pipeline encodes them: overlapping windows of the tokenizer's pair layout.

Each window is ``[CLS] question [SEP] context part [SEP]`` (the post-processor's pair template, e.g. RoBERTa's
``<s> question </s></s> context part </s>``). The context alone is truncated ("only_second") and overflows into
further windows, consecutive windows sharing ``doc_stride`` context tokens; the question is first cut to at most
``max_question_len`` pieces (`cut_question`). The truncation itself is the ``tokenizers`` library's
(``WordPieceTokenizer.encode_pair_windows``); these are the QA rules around it (docs/design/qa.md, rule 1).
"""
from __future__ import annotations

from engine.checks import require_int
from engine.text.encoding import Encoding
from engine.text.tokenizer import WordPieceTokenizer
from engine.text.vocabulary import check_text


def cut_question(tokenizer: WordPieceTokenizer, question: str, max_question_len: int) -> str:
    """``question``, or its longest prefix cut at a piece's end whose pieces are its first ones and at most
    ``max_question_len`` (WordPiece: exactly that many; a byte-level piece may end inside a character)."""
    backend = tokenizer.backend
    asked = backend.encode(question, add_special_tokens=False)
    for count in range(max_question_len, 0, -1) if len(asked.ids) > max_question_len else ():
        prefix = question[:asked.offsets[count - 1][1]]
        ids = backend.encode(prefix, add_special_tokens=False).ids
        if len(ids) <= max_question_len and ids == asked.ids[:len(ids)]:
            return prefix
    return question if len(asked.ids) <= max_question_len else ""


def encode_qa_windows(tokenizer: WordPieceTokenizer, question: str, context: str, max_seq_len: int = 384,
                      doc_stride: int = 128, max_question_len: int = 64) -> list[Encoding]:
    """The windows of ``question`` and ``context``, as the QA pipeline encodes them, each at most ``max_seq_len``
    tokens with specials.

    The question is first cut to ``max_question_len`` tokens (`cut_question`). Offsets of context tokens index
    ``context``. Raises ValueError when the question leaves no room for the context or ``doc_stride`` >= the
    context room of a window.
    """
    check_text(question, "question")
    check_text(context, "context")
    for name, value in (("max_seq_len", max_seq_len), ("doc_stride", doc_stride),
                        ("max_question_len", max_question_len)):
        require_int(value, name)
    if max_question_len < 1 or doc_stride < 0:
        raise ValueError(f"need max_question_len >= 1 and doc_stride >= 0, got {max_question_len}, {doc_stride}")
    question = cut_question(tokenizer, question, max_question_len)
    num_question = len(tokenizer.backend.encode(question, add_special_tokens=False).ids)
    num_specials = tokenizer.num_special_tokens(True)
    room = max_seq_len - num_question - num_specials                   # context tokens per window
    if room < 1:
        raise ValueError(f"the question takes {num_question} tokens, which leaves no room for the context "
                         f"in max_seq_len={max_seq_len}; shorten the question or raise max_seq_len")
    num_context = len(tokenizer.backend.encode(context, add_special_tokens=False).ids)
    if num_context > room and doc_stride >= room:
        raise ValueError(f"doc_stride ({doc_stride}) must be smaller than the {room} context tokens a window "
                         f"holds (max_seq_len {max_seq_len} - {num_question} question tokens - "
                         f"{num_specials} specials)")
    return tokenizer.encode_pair_windows(question, context, max_seq_len, doc_stride)
