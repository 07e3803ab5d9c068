"""What a canvas view's exports are named after (docs/design/browser-views.md, *Export*): the model and the input,
sent once in the value as ``export`` (about 150 bytes), so the page names a file
``bert-explorer_<model>_<first words of the input>_<view>_<detail>.svg`` and titles the SVG with the model, the input
and the view. The page adds the view and its detail (``assets/canvas_tools.js`` ``fileName``, the same ``safe``
rule in JavaScript).
"""
from __future__ import annotations

import re
import unicodedata

APP = "bert-explorer"
MODEL_CHARS = 60        # a file name's model part, at most (a checkpoint: run and step)
INPUT_WORDS = 6         # a file name's input part: the first words of the input
INPUT_CHARS = 40        # and at most this many characters
TITLE_CHARS = 120       # the input as the SVG's title shows it, at most

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def safe(text: str, limit: int | None = None) -> str:
    """``text`` as a file name's part: accents dropped, every run of other characters than letters, digits,
    ``-`` and ``_`` one ``-``, no ``-`` or ``_`` at either end, at most ``limit`` characters."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    out = re.sub(r"-{2,}", "-", _UNSAFE.sub("-", plain)).strip("-_")
    if limit is not None and len(out) > limit:
        out = out[:limit].rstrip("-_")
    return out


def first_words(text: str, words: int = INPUT_WORDS, limit: int = INPUT_CHARS) -> str:
    """The first ``words`` words of ``text`` as a file name's part (lower case, ``-`` between them), cut at a word
    within ``limit`` characters; "input" when nothing of it is left (a text of symbols or of another script)."""
    kept: list[str] = []
    for word in (safe(w) for w in text.split()):
        if len(kept) == words or kept and len("-".join([*kept, word])) > limit:
            break
        if word:
            kept.append(word)
    return (safe("-".join(kept), limit) or "input").lower()


def shown_input(text: str, pair: str | None = None, limit: int = TITLE_CHARS) -> str:
    """The input as a title shows it: its whitespace one space each, the pair after " / ", at most ``limit``
    characters (an ellipsis when cut)."""
    said = " ".join(text.split()) + (f" / {' '.join(pair.split())}" if pair and pair.strip() else "")
    return said if len(said) <= limit else said[:limit - 1].rstrip() + "…"


def export_info(model: str, text: str, pair: str | None = None) -> dict[str, str]:
    """A view value's ``export``: ``model`` (the model as the picker's source names it), ``input`` (as a title
    shows it) and ``stem`` (``bert-explorer_<model>_<first words>``, the file name's start)."""
    return {"model": model, "input": shown_input(text, pair),
            "stem": f"{APP}_{safe(model, MODEL_CHARS) or 'model'}_{first_words(text)}"}
