"""The Tokenize tab explains its words: WordPiece, segment, position embedding and [UNK] are linked to the
glossary (a hover title with the one-sentence meaning), once each in the tab's text."""
from __future__ import annotations

import html

import pytest

from explorer.glossary import entry
from explorer.tokenize.tab import INTRO


@pytest.mark.parametrize("term", ["WordPiece", "segment", "position embedding", "[UNK]"])
def test_each_word_is_linked_once(term: str) -> None:
    assert INTRO.count(f'data-gloss="{entry(term).anchor}"') == 1, term
    assert f'title="{html.escape(entry(term).meaning, quote=True)}"' in INTRO          # the meaning on hover
