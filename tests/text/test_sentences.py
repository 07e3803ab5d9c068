"""Sentence splitting (engine.text.sentences): boundaries, abbreviations, initials, quotes, determinism."""
from __future__ import annotations

import pytest

from engine.text.sentences import split_sentences


@pytest.mark.parametrize("text, expected", [
    ("Hello world. This is BERT! Is it? Yes.", ["Hello world.", "This is BERT!", "Is it?", "Yes."]),
    ("Mr. Smith met Dr. Jones at St. Paul's. They talked.", ["Mr. Smith met Dr. Jones at St. Paul's.", "They talked."]),
    ("Use a tokenizer, e.g. WordPiece. It is fast.", ["Use a tokenizer, e.g. WordPiece.", "It is fast."]),
    ("J. R. R. Tolkien wrote it. The end.", ["J. R. R. Tolkien wrote it.", "The end."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ('It ended. "Really?" she asked.', ["It ended.", '"Really?" she asked.']),
    ("Wait... What happened?! Nothing.", ["Wait...", "What happened?!", "Nothing."]),
    ("version 3.11 is out. the next one is not.", ["version 3.11 is out. the next one is not."]),
    ("Lines\nwrapped\n\tacross   space. Next one", ["Lines wrapped across space.", "Next one"]),
    ("No. 5 is here. Ok.", ["No. 5 is here.", "Ok."]),
    ("", []),
    ("   \n ", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_is_deterministic_and_lossless_up_to_spaces():
    text = "The cat sat. The dog ran! Did the bird sing? It did, e.g. loudly. Mr. Fox agreed."
    once = split_sentences(text)
    assert once == split_sentences(text)
    assert " ".join(once) == text
