"""The Why tab explains its words: attribution and logit are linked to the glossary once each."""
from __future__ import annotations

import pytest

from explorer.glossary import entry
from explorer.why.tab import INTRO


@pytest.mark.parametrize("term", ["attribution", "logit"])
def test_each_word_is_linked_once(term: str) -> None:
    assert INTRO.count(f'data-gloss="{entry(term).anchor}"') == 1, term
