"""The Embeddings tab's maps as one standalone document (``explorer.embeddings.documents``): the select offers
exactly the components the value holds, a line says which, it starts at the page's component, and a model with no
position table gets the dimensions map alone."""
from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest

from engine.probes.inference import embeddings
from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult
from explorer.embeddings import canvas, documents
from support.probing_helpers import make_services

PAIR = ("the cat sat on the mat", "the dog ran")


@pytest.fixture(scope="module")
def result(tiny_tokenizer) -> EmbeddingsResult:
    return embeddings(make_services(tiny_tokenizer).model("default"), *PAIR)


def select(text: str) -> tuple[list[str], str]:
    box = re.search(r'id="embeddings-component" data-mirror="radio">(.*?)</label>', text).group(1)
    return re.findall(r'<option value="([^"]*)"', box), re.search(r'<option value="([^"]*)" selected', box).group(1)


def test_every_component_held_is_offered_and_both_maps_drawn(result: EmbeddingsResult) -> None:
    dimensions = canvas.dimensions_value(result, "output")
    similarity = canvas.similarity_value(result.position_similarity)
    text = documents.maps_document(dimensions, similarity, "embeddings · tiny", component="word")
    assert select(text) == (list(COMPONENTS), "word")                     # the page's radio, not the answer's
    assert 'class="emb-view emb-dimensions"' in text and 'class="emb-view emb-similarity"' in text
    assert "This file holds every component" in html.unescape(text)
    stored = json.loads(re.search(r'id="sa-values">(.*?)</script>', text, re.S).group(1))
    assert stored == json.loads(json.dumps([dimensions, similarity]))


def test_a_value_with_one_component_offers_it_alone(result: EmbeddingsResult) -> None:
    dimensions = canvas.dimensions_value(result, "sum", only=["sum"])
    empty = canvas.similarity_value(np.zeros((0, 0), np.float32))          # a model with no position table
    text = html.unescape(documents.maps_document(dimensions, empty, "t", component="word"))
    assert select(text) == (["sum"], "sum") and "holds the sum component only" in text
    assert "emb-similarity" not in text and "No position similarity" in text


def test_no_answer_is_refused_in_a_sentence() -> None:
    with pytest.raises(ValueError, match="There are no hidden dimensions to save yet"):
        documents.maps_document(None, None, "t")
