"""Two tokenizations of one text lined up by words, for comparing models whose tokenizers differ.

Pieces cannot be matched one to one across tokenizers (BERT's ``play ##ing`` against RoBERTa's ``Ġplaying``),
but both tokenizers say which characters of the text each piece covers (its offsets; special tokens cover none)
and which of its own words each piece belongs to. ``align_words`` puts the two together:

* each side's **words** are the character spans of its pieces grouped by the tokenizer's word ids (its
  pre-tokenizer's words; whitespace trimmed from a span, a piece that covers no character joins its word);
* an **aligned word** is a smallest stretch of text that is a whole number of words on both sides: spans of
  either side that overlap are merged (XLM-R's ``now,`` with BERT's ``now`` and ``,`` is one word; BERT's
  ``don ' t`` with RoBERTa's ``don 't`` gives ``don`` and ``'t``). Spans that only touch stay apart.

A text the two sides read into the same pieces gives each tokenizer's own words. A mask written ``[MASK]``
that a side read as its own mask token (``<mask>``: ``fill_mask.model_mask_text``) has its offsets mapped back
to the typed text first. A special token typed in the text (``[CLS]``, ``</s>``) is no word. A word that one
side covers with no piece (a character its normalizer removes, a special token, the end of a text it truncated)
cannot be aligned, and the error says which; nor can a text with no words.

A word's vector is the **mean** of its pieces' vectors; attention **to** a word is the **sum** over its
pieces and **from** a word the **mean** over its pieces (Clark et al., 2019), special tokens left out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import torch

from engine.text.encoding import Encoding

Side = Literal["a", "b"]
_SIDES: tuple[Side, Side] = ("a", "b")


@dataclass(frozen=True)
class AlignedWord:
    """One stretch of the text that both tokenizations cover with whole words, and its pieces on each side."""

    text: str                        # the characters, as typed
    sequence: int                    # 0 = the text, 1 = the text pair
    start: int                       # character span in its own text
    end: int
    pieces_a: tuple[int, ...]        # token positions in A's encoding
    pieces_b: tuple[int, ...]        # token positions in B's encoding

    def pieces(self, side: Side) -> tuple[int, ...]:
        """The token positions of this word on ``side`` ("a" or "b")."""
        return self.pieces_a if side == "a" else self.pieces_b


@dataclass(frozen=True)
class WordAlignment:
    """The aligned words of one input, in text order, with each side's token count (specials included)."""

    words: list[AlignedWord]
    num_pieces_a: int
    num_pieces_b: int

    @property
    def texts(self) -> list[str]:
        """Each word's characters, in order."""
        return [word.text for word in self.words]

    def num_pieces(self, side: Side) -> int:
        """How many tokens ``side`` read the input into, special tokens included."""
        return self.num_pieces_a if side == "a" else self.num_pieces_b

    def word_at(self, side: Side, position: int) -> int | None:
        """The index of the word that holds token ``position`` of ``side``, or None (a special token)."""
        return next((w for w, word in enumerate(self.words) if position in word.pieces(side)), None)

    def membership(self, side: Side) -> np.ndarray:
        """``(W, S)`` float32: row ``w`` is 1 at the positions of word ``w``'s pieces on ``side``, else 0."""
        member = np.zeros((len(self.words), self.num_pieces(side)), dtype=np.float32)    # (W, S)
        for w, word in enumerate(self.words):
            member[w, list(word.pieces(side))] = 1.0
        return member

    def pool_states(self, states: torch.Tensor, side: Side) -> torch.Tensor:
        """Each word's vector, the mean of its pieces' vectors: ``(L + 1, S, H)`` -> ``(L + 1, W, H)``."""
        member = torch.from_numpy(self.membership(side)).to(states.dtype)                 # (W, S)
        mean = member / member.sum(1, keepdim=True)                                       # (W, S), rows sum to 1
        return torch.matmul(mean, states)                                                  # (L+1, W, H)

    def pool_attention(self, maps: np.ndarray, side: Side) -> np.ndarray:
        """Word-level maps from ``(..., S, S)`` piece maps: to a word the sum over its pieces, from a word the
        mean over its pieces, special tokens left out -> ``(..., W, W)`` (rows sum to at most 1)."""
        member = self.membership(side)                                                     # (W, S)
        mean = member / member.sum(1, keepdims=True)                                       # (W, S)
        return mean @ maps @ member.T                                                      # (..., W, W)


def original_offsets(encoding: Encoding, texts: Sequence[str | None], mask: str | None,
                     typed: str) -> list[tuple[int, int] | None]:
    """Each token's character span in the typed text of its sequence (``texts[sequence]``), or None for a
    token of no text (a special token). ``mask`` is the token each ``typed`` mask (``[MASK]``) was written as
    before encoding (None: the text was encoded as typed); a span inside it maps to the whole typed mask."""
    spans: list[tuple[int, int] | None] = []
    maps = [_position_map(text, typed, mask) if text is not None else None for text in texts]
    for (start, end), sequence in zip(encoding.offsets, encoding.sequence_ids):
        position = maps[sequence] if sequence is not None and sequence < len(maps) else None
        if position is None:
            spans.append(None)
            continue
        start, end = min(start, len(position) - 1), min(end, len(position) - 1)
        spans.append((position[start][0], position[end][1]))
    return spans


def _position_map(text: str, typed: str, written: str | None) -> list[tuple[int, int]]:
    """For each character position of ``text`` with every ``typed`` written as ``written`` (and the end), the
    position in ``text`` as typed: ``(as a start, as an end)``; inside a rewritten mask, its typed edges."""
    if not written or written == typed:
        return [(i, i) for i in range(len(text) + 1)]
    positions: list[tuple[int, int]] = []
    cursor = 0
    while True:
        found = text.find(typed, cursor)
        stop = len(text) if found < 0 else found
        positions += [(i, i) for i in range(cursor, stop)]
        if found < 0:
            return positions + [(len(text), len(text))]
        positions += [(found, found + len(typed))] * len(written)
        cursor = found + len(typed)


def _word_spans(spans: Sequence[tuple[int, int] | None], encoding: Encoding, texts: Sequence[str | None],
                no_word: frozenset[int]) -> tuple[dict[tuple[int, int], tuple[int, int, list[int]]], list[tuple]]:
    """One side's words: ``(sequence, word id) -> (start, end, token positions)``, whitespace trimmed from each
    span (a word whose pieces cover no character is left out); and the ``(sequence, start, end)`` of the
    pieces that are no word (ids in ``no_word``: a special token typed in the text)."""
    words: dict[tuple[int, int], tuple[int, int, list[int]]] = {}
    specials: list[tuple] = []
    for position, (span, sequence) in enumerate(zip(spans, encoding.sequence_ids)):
        if span is None or sequence is None:
            continue
        start, end = _trimmed(texts[sequence] or "", *span)
        if encoding.input_ids[position] in no_word:
            specials.append((sequence, start, end))
            continue
        word_id = encoding.word_ids[position]
        key = (sequence, word_id if word_id is not None else -1 - position)
        old_start, old_end, pieces = words.get(key, (start, end, []))
        if start < end and old_start < old_end:
            start, end = min(start, old_start), max(end, old_end)
        elif old_start < old_end:
            start, end = old_start, old_end
        words[key] = (start, end, pieces + [position])
    return {key: value for key, value in words.items() if value[0] < value[1]}, specials


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` with the whitespace at both ends left out (an empty span if nothing else is in it)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def align_words(text: str, text_pair: str | None, encoding_a: Encoding, encoding_b: Encoding,
                mask_a: str | None = None, mask_b: str | None = None, no_word_a: frozenset[int] = frozenset(),
                no_word_b: frozenset[int] = frozenset(), typed_mask: str = "[MASK]") -> WordAlignment:
    """The aligned words of ``text`` (and ``text_pair``) as A and B encoded it (see the module docstring).
    ``mask_a`` / ``mask_b``: the token each side wrote ``typed_mask`` as before encoding; ``no_word_a`` /
    ``no_word_b``: ids that are no word where typed (special tokens: ``[CLS]``, ``</s>``). ``ValueError`` when the
    text has no word both read, or a word one side covers with no piece."""
    texts = (text, text_pair or None)
    found = [_word_spans(original_offsets(encoding, texts, mask, typed_mask), encoding, texts, no_word)
             for encoding, mask, no_word in ((encoding_a, mask_a, no_word_a), (encoding_b, mask_b, no_word_b))]
    spans = sorted((sequence, start, end, side, pieces) for side, (words, _) in zip(_SIDES, found)
                   for (sequence, _), (start, end, pieces) in words.items())
    groups: list[list] = []                        # [sequence, start, end, pieces_a, pieces_b]
    for sequence, start, end, side, pieces in spans:
        if not groups or groups[-1][0] != sequence or start >= groups[-1][2]:
            groups.append([sequence, start, end, [], []])
        group = groups[-1]
        group[2] = max(group[2], end)
        group[3 if side == "a" else 4].extend(pieces)
    if not groups:
        raise ValueError("this text has no words both models read (only special tokens, or characters both "
                         "tokenizers drop): type a few words")
    words = [AlignedWord(texts[sequence][start:end], sequence, start, end, tuple(sorted(a)), tuple(sorted(b)))
             for sequence, start, end, a, b in groups]
    for word in words:
        for side, encoding, (_, specials) in zip(_SIDES, (encoding_a, encoding_b), found):
            if not word.pieces(side):
                raise ValueError(_dropped(word, side, encoding, texts, specials))
    return WordAlignment(words, len(encoding_a.input_ids), len(encoding_b.input_ids))


def _dropped(word: AlignedWord, side: Side, encoding: Encoding, texts: Sequence[str | None],
             specials: Sequence[tuple]) -> str:
    """Why ``word`` has no piece on ``side``, in one sentence."""
    name = side.upper()
    for sequence, start, end in specials:
        if sequence == word.sequence and start < word.end and word.start < end:
            return (f"model {name} reads {(texts[sequence] or '')[start:end]!r} as a special token, which is no "
                    "word, so the two models' words cannot be aligned: remove it from the text")
    if encoding.truncated:
        return (f"model {name} reads only the first {len(encoding.input_ids)} tokens of this text, so the two "
                f"models' words cannot be aligned past {word.text!r}: shorten the text")
    return (f"model {name}'s tokenizer drops {word.text!r} (no piece covers it), so the two models' words cannot "
            "be aligned: remove it from the text")
