"""The Fill-mask tab explains its words: probability and [MASK] are linked to the glossary once each."""
from __future__ import annotations

import pytest

from explorer.fill_mask.tab import INTRO
from explorer.glossary import entry


@pytest.mark.parametrize("term", ["probability", "[MASK]"])
def test_each_word_is_linked_once(term: str) -> None:
    assert INTRO.count(f'data-gloss="{entry(term).anchor}"') == 1, term
