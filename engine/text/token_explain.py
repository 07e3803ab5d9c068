"""The Tokenize tab's view of one encoding: a table row per piece, counts, layout, what truncation cut.

Pure bookkeeping over an `Encoding` (no tokenization happens here); the tokenizer's
``explain()`` encodes and hands both the kept and the untruncated encodings over.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.text.encoding import Encoding

MAX_DROPPED_ROWS = 512   # cut pieces described per segment (a 100,000-character paste cuts ~25,000)
BERT_TEMPLATES = {False: [("special", "[CLS]"), ("segment", "A"), ("special", "[SEP]")],
                  True: [("special", "[CLS]"), ("segment", "A"), ("special", "[SEP]"), ("segment", "B"),
                         ("special", "[SEP]")]}


@dataclass
class TokenRow:
    """One row of the Tokenize tab's table."""

    index: int
    token: str
    id: int
    type_id: int
    start: int
    end: int
    text: str            # the exact source characters the piece came from ("" for specials)
    special: bool
    word_id: int | None
    segment: str         # "A", "B" or "special"
    is_continuation: bool  # a "##" piece; for BPE/Unigram, a piece after the first of its word
    shown: str = ""      # the piece as shown to a reader (``piece_display``: byte-level decoded, ``▁`` word start)


@dataclass
class Explanation:
    """Everything the Tokenize tab shows for one input, in one call."""

    text: str
    text_pair: str | None
    encoding: Encoding
    rows: list[TokenRow]
    num_tokens: int          # including specials
    num_words: int           # pre-tokenized words across both texts
    num_unknown: int         # count of [UNK]
    unknown_rate: float      # num_unknown / number of non-special tokens (0.0 if none)
    max_length: int
    truncated: bool
    num_truncated_tokens: int
    layout: str              # e.g. "[CLS] A×5 [SEP] B×4 [SEP]"; RoBERTa's "<s> A×5 </s></s> B×4 </s>"
    # the pieces truncation cut, in order (segment A's, then B's), the first MAX_DROPPED_ROWS of
    # each segment; ``index`` is their position in the untruncated encoding. The model never sees them.
    dropped: list[TokenRow] = field(default_factory=list)
    num_dropped: dict[str, int] = field(default_factory=dict)   # segment ("A", "B") -> pieces cut, all counted


def describe(enc: Encoding, full: Any, text: str, text_pair: str | None, max_length: int,
             unk_token_id: int | None, template: Sequence[tuple[str, str]] | None = None,
             display: Callable[[str], str] | None = None, continuation_prefix: str | None = "##",
             full_tokens: list[str] | None = None) -> Explanation:
    """Build the `Explanation` of ``enc``; ``full`` is the same input without truncation (a
    ``tokenizers.Encoding``: ``ids``, ``tokens``, ``offsets``, ``sequence_ids``, ...).

    ``template`` is where the tokenizer puts its special tokens (``special_roles.layout_template``;
    BERT's by default), ``display`` shows a piece (``TokenRow.shown``; as it is by default), and a
    piece is a continuation if it starts with ``continuation_prefix``, or, when that is None, if the
    piece before it belongs to the same word. ``full_tokens`` are ``full``'s pieces as ``enc`` names them
    (an unknown piece as the unk token); ``full.tokens`` by default."""
    sources = (text, text_pair or "")
    look = (display or str, continuation_prefix)
    rows = _rows(enc.tokens, enc.input_ids, enc.token_type_ids, enc.offsets, enc.special_tokens_mask,
                 enc.word_ids, enc.sequence_ids, sources, range(len(enc.tokens)), look)
    kept = [sum(r.segment == s for r in rows) for s in "AB"]
    dropped: list[TokenRow] = []
    num_dropped: dict[str, int] = {}
    if enc.truncated:   # truncation cuts each segment from the right: what is kept is a prefix of it
        sequence_ids = full.sequence_ids
        cut = [[i for i, s in enumerate(sequence_ids) if s == seg][k:] for seg, k in enumerate(kept)]
        num_dropped = {seg: len(c) for seg, c in zip("AB", cut) if c}
        dropped = _rows(full_tokens or full.tokens, full.ids, full.type_ids, full.offsets, full.special_tokens_mask,
                        full.word_ids, sequence_ids, sources, [i for c in cut for i in c[:MAX_DROPPED_ROWS]], look)
    content = [r for r in rows if not r.special]
    num_unknown = sum(r.id == unk_token_id for r in content) if unk_token_id is not None else 0
    layout = _layout(template or BERT_TEMPLATES[text_pair is not None], kept)
    return Explanation(
        text=text, text_pair=text_pair, encoding=enc, rows=rows, num_tokens=len(rows),
        num_words=len({(s, w) for s, w in zip(full.sequence_ids, full.word_ids) if w is not None}),
        num_unknown=num_unknown, unknown_rate=num_unknown / len(content) if content else 0.0,
        max_length=max_length, truncated=enc.truncated, num_truncated_tokens=enc.num_truncated_tokens,
        layout=layout, dropped=dropped, num_dropped=num_dropped,
    )


def _layout(template: Sequence[tuple[str, str]], kept: list[int]) -> str:
    """``template`` with each segment's kept count: "[CLS] A×5 [SEP]", "<s> A×5 </s></s> B×4 </s>"."""
    out = ""
    for n, (kind, name) in enumerate(template):
        shown = name if kind == "special" else f"{name}×{kept['AB'.index(name)]}"
        glued = n > 0 and kind == "special" and template[n - 1][0] == "special"
        out += shown if glued or not out else f" {shown}"
    return out


def _rows(tokens: list[str], ids: list[int], type_ids: list[int], offsets: list[tuple[int, int]],
          special: list[int], word_ids: list[int | None], sequence_ids: list[int | None],
          sources: tuple[str, str], indices: Iterable[int],
          look: tuple[Callable[[str], str], str | None] = (str, "##")) -> list[TokenRow]:
    """A `TokenRow` for each piece at ``indices``; ``text`` is the piece's exact source characters."""
    display, prefix = look
    rows = []
    for i in indices:
        sid, (start, end), tok = sequence_ids[i], offsets[i], tokens[i]
        if prefix is not None:
            continuation = tok.startswith(prefix)
        else:
            continuation = (sid is not None and i > 0 and sequence_ids[i - 1] == sid
                            and word_ids[i] is not None and word_ids[i - 1] == word_ids[i])
        rows.append(TokenRow(index=i, token=tok, id=ids[i], type_id=type_ids[i], start=start, end=end,
                             text="" if sid is None else sources[sid][start:end], special=bool(special[i]),
                             word_id=word_ids[i], segment="special" if sid is None else "AB"[sid],
                             is_continuation=continuation, shown=display(tok)))
    return rows
