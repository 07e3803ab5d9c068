"""The Tokenize tab's view of one encoding: a table row per piece, counts, layout, highlights.

Pure bookkeeping over an `Encoding` (no tokenization happens here); the tokenizer's
``explain()`` encodes and hands both the kept and the untruncated encodings over.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.text.encoding import Encoding


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
    is_continuation: bool  # a "##" piece


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
    layout: str              # e.g. "[CLS] A×5 [SEP] B×4 [SEP]"
    # (piece, label) pairs for gr.HighlightedText: label groups pieces of the same word,
    # e.g. "A·w3" / "B·w0" / "special"; pieces joined the way the text shows them
    highlights: list[tuple[str, str | None]] = field(default_factory=list)


def describe(enc: Encoding, full: Encoding, text: str, text_pair: str | None, max_length: int,
             unk_token_id: int) -> Explanation:
    """Build the `Explanation` of ``enc`` (``full`` is the same input without truncation)."""
    sources = (text, text_pair or "")
    rows: list[TokenRow] = []
    for i, (tok, tid, typ, (start, end), spec, wid, sid) in enumerate(zip(
            enc.tokens, enc.input_ids, enc.token_type_ids, enc.offsets, enc.special_tokens_mask,
            enc.word_ids, enc.sequence_ids)):
        rows.append(TokenRow(
            index=i, token=tok, id=tid, type_id=typ, start=start, end=end,
            text="" if sid is None else sources[sid][start:end], special=bool(spec), word_id=wid,
            segment="special" if sid is None else "AB"[sid], is_continuation=tok.startswith("##"),
        ))
    content = [r for r in rows if not r.special]
    num_unknown = sum(r.id == unk_token_id for r in content)
    counts = [sum(r.segment == s for r in rows) for s in "AB"]
    cut = [full.sequence_ids.count(s) > enc.sequence_ids.count(s) for s in (0, 1)]
    layout = f"[CLS] A×{counts[0]} [SEP]" + ("" if text_pair is None else f" B×{counts[1]} [SEP]")
    return Explanation(
        text=text, text_pair=text_pair, encoding=enc, rows=rows, num_tokens=len(rows),
        num_words=len({(s, w) for s, w in zip(full.sequence_ids, full.word_ids) if w is not None}),
        num_unknown=num_unknown, unknown_rate=num_unknown / len(content) if content else 0.0,
        max_length=max_length, truncated=enc.truncated, num_truncated_tokens=enc.num_truncated_tokens,
        layout=layout, highlights=_highlights(rows, sources, text_pair is not None, cut),
    )


def _highlights(rows: list[TokenRow], sources: tuple[str, str], is_pair: bool,
                truncated: list[bool]) -> list[tuple[str, str | None]]:
    """(piece, label) spans: "[CLS] " + text + " [SEP] " + text_pair + " [SEP]" read back in order.

    Gaps between pieces (whitespace, dropped control characters) are labelled None; the
    tail that truncation dropped is labelled "truncated"; an empty text adds no extra space.
    """
    out: list[tuple[str, str | None]] = [("[CLS]", "special")]
    for seq in range(2 if is_pair else 1):
        source = sources[seq]
        if source:
            out.append((" ", None))
        pos = 0
        for r in rows:
            if r.segment != "AB"[seq] or r.end <= pos:   # pieces sharing a span were shown already
                continue
            start = max(r.start, pos)
            if start > pos:
                out.append((source[pos:start], None))
            out.append((source[start:r.end], f"{r.segment}·w{r.word_id}"))
            pos = r.end
        if pos < len(source):
            tail = source[pos:]
            out.append((tail, "truncated" if truncated[seq] else None))
        out += [(" ", None), ("[SEP]", "special")]
    return out
