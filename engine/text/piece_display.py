"""Pieces shown readably: one visible word-start mark for every vocabulary kind.

SentencePiece (Unigram, XLM-R/ALBERT/DeBERTa-v3) already marks a word's start with ``▁``. Byte-level BPE
(RoBERTa, GPT-2, ModernBERT) writes each byte as a printable stand-in character (GPT-2's table: ``Ġ`` a
space, ``Ċ`` a newline, ``Ã©`` the two bytes of ``é``); ``display_piece`` turns those back into the bytes,
decodes them as UTF-8 (a piece holding only part of a character, as emoji often split, shows its bytes as
``\\xf0\\x9f``), and shows a space as ``▁``, the same mark, so both kinds read alike. Newline, tab, return
and the other control characters become visible symbols (``↵``, ``⇥``, ``␍``, U+2400..), in any piece.
WordPiece's ``##`` pieces are left as they are. This is for showing only: offsets come from the tokenizer,
never from here.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

WORD_START = "▁"
_VISIBLE = {" ": WORD_START, "\n": "↵", "\t": "⇥", "\r": "␍", "\x7f": "␡"}


@lru_cache(maxsize=1)
def _byte_of_char() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` table, inverted: stand-in character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes)}


def _visible(char: str) -> str:
    if char in _VISIBLE:
        return _VISIBLE[char]
    return chr(0x2400 + ord(char)) if ord(char) < 0x20 else char


def display_piece(piece: str, byte_level: bool = False) -> str:
    """``piece`` as shown to a reader: for a byte-level BPE piece (``byte_level``), its bytes decoded with a
    space as ``▁`` and control characters visible; any other piece (WordPiece ``##x``, SentencePiece ``▁x``,
    or one holding a character outside the byte table, such as an added token) as it is, but for its
    control characters (a newline a SentencePiece model kept), shown visibly too."""
    table = _byte_of_char()
    if not byte_level or not piece or any(char not in table for char in piece):
        return "".join(_visible(char) if char != " " else char for char in piece)
    text = bytes(table[char] for char in piece).decode("utf-8", errors="backslashreplace")
    return "".join(_visible(char) for char in text)


def is_byte_level(described: Mapping[str, Any]) -> bool:
    """Whether a ``tokenizer.json`` (its parsed form) writes pieces in byte-level stand-ins: a ByteLevel
    pre-tokenizer or decoder, on its own or inside a Sequence."""
    def has_byte_level(part: Any) -> bool:
        if not isinstance(part, Mapping):
            return False
        if part.get("type") == "ByteLevel":
            return True
        inner = part.get("pretokenizers") or part.get("decoders") or []
        return any(has_byte_level(p) for p in inner)
    return has_byte_level(described.get("pre_tokenizer")) or has_byte_level(described.get("decoder"))
