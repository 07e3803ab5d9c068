"""The Embeddings tab explains its words (layer, PCA, cosine similarity: linked to the glossary once in the tab's
text) and states the one layer rule, which both of its layer fields say the same way."""
from __future__ import annotations

import pytest

from explorer.embeddings import corpus_neighbours, sections
from explorer.embeddings.tab import INTRO
from explorer.glossary import LAYER_RULE, entry


@pytest.mark.parametrize("term", ["layer", "PCA", "cosine similarity"])
def test_each_word_is_linked_once_in_the_tab(term: str) -> None:
    text = INTRO + corpus_neighbours.INTRO
    assert text.count(f'data-gloss="{entry(term).anchor}"') == 1, term


def test_the_layer_rule_is_stated_and_both_layer_fields_say_it_alike() -> None:
    assert LAYER_RULE in INTRO
    assert sections.LAYER_NOTE.startswith("0 = the embeddings' output") and "1 to L" in sections.LAYER_NOTE
    assert "layer 0, the embeddings' output" in corpus_neighbours.INTRO.replace("At layer 0", "layer 0")
