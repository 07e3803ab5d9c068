"""Sentences: a small deterministic regex splitter (no model, no download), good enough for pretraining
pairs. A pretraining *document* is a list of these sentences (``engine.text.documents``)."""
from __future__ import annotations

import re

# Lower-cased words that end with "." without ending a sentence ("Mr. Smith", "e.g. This").
ABBREVIATIONS = frozenset("""
    mr mrs ms dr prof st jr sr sen rep gov gen col capt lt sgt cmdr adm rev hon fr mt ft
    vs cf viz al approx dept est fig no nos vol vols pp ch sec inc ltd co corp bros
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
""".split())

_BOUNDARY = re.compile(r"""([.!?]+)(["'”’)\]]*)\s+""")
_OPENERS = "\"'“‘([" 
_WHITESPACE = re.compile(r"\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences; whitespace (newlines included) is collapsed to one space.

    A boundary is one or more of ``. ! ?``, optionally followed by closing quotes or
    brackets, then whitespace, then an upper-case letter (optionally after an opening
    quote or bracket). A single ``.`` does not end a sentence after a known abbreviation
    (``ABBREVIATIONS``: Mr., Dr., St., No., ...), a single-letter initial (``J. Smith``)
    or a dotted abbreviation (``e.g.``, ``i.e.``, ``U.S.``). Empty sentences are dropped.
    """
    text = _WHITESPACE.sub(" ", text).strip()
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        j = match.end()
        while j < len(text) and text[j] in _OPENERS:
            j += 1
        if j == len(text) or not text[j].isupper():
            continue
        if match.group(1) == "." and _is_abbreviation(text[start:match.start()]):
            continue
        sentences.append(text[start:match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def _is_abbreviation(before: str) -> bool:
    """Whether the word right before a single "." is an abbreviation or an initial."""
    words = before.rsplit(" ", 1)
    word = words[-1].lstrip(_OPENERS)
    if not word:
        return False
    if len(word) == 1 and word.isalpha():
        return True
    if re.fullmatch(r"(?:[^\W\d_]\.)+[^\W\d_]", word):      # e.g / i.e / U.S
        return True
    return word.lower() in ABBREVIATIONS
