"""The QA tab explains its words: doc stride, null score and logit are linked to the glossary once each."""
from __future__ import annotations

import pytest

from explorer.glossary import entry
from explorer.qa.tab import INTRO


@pytest.mark.parametrize("term", ["doc stride", "null score", "logit"])
def test_each_word_is_linked_once(term: str) -> None:
    assert INTRO.count(f'data-gloss="{entry(term).anchor}"') == 1, term
