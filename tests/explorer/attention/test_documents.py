"""The Attention tab's views as standalone documents (``explorer.attention.documents``): the selects offer exactly
the layers and heads the value holds, a line says which, they start at the page's layer and head, and values that
do not belong together are refused in a sentence."""
from __future__ import annotations

import html
import json
import re

import pytest

from engine.model.loaded_model import LoadedModel
from engine.probes.attention.maps import attention
from engine.probes.attention.neuron_view import neuron_inputs
from explorer.attention import canvas, documents, neuron_canvas
from support.probing_helpers import tiny_model

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def loaded(tiny_tokenizer) -> LoadedModel:
    model = tiny_model(0)
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny test model")       # 2 layers x 4 heads


def options(text: str, element: str) -> tuple[list[str], str]:
    """(the values a control offers, the selected one)."""
    box = re.search(rf'id="{element}" data-mirror="number">(.*?)</label>', text).group(1)
    return re.findall(r'<option value="([^"]*)"', box), re.search(r'<option value="([^"]*)" selected', box).group(1)


def test_every_map_held_offers_every_layer_and_head(loaded) -> None:
    values = canvas.values(attention(loaded, TEXT), 1, 2, [0, 2], "id-1")
    text = documents.views_document(*values, title="attention · tiny")
    assert options(text, "attention-layer") == (["1", "2"], "2")        # layers from 1: the engine's index 1
    assert options(text, "attention-head") == (["0", "1", "2", "3"], "2")
    assert "every head's map of this input: layers 1, 2, heads 0–3." in html.unescape(text)
    stored = json.loads(re.search(r'id="sa-values">(.*?)</script>', text, re.S).group(1))
    assert stored == json.loads(json.dumps(list(values)))
    assert 'class="attn-view attn-heatmap"' in text and 'class="attn-view attn-model-view"' in text
    moved = documents.views_document(*values, title="t", layer=0, head=3)   # the page's sliders moved since
    assert options(moved, "attention-layer")[1] == "1" and options(moved, "attention-head")[1] == "3"


def test_a_long_input_offers_only_the_layer_and_heads_it_holds(loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    result = attention(loaded, TEXT)
    monkeypatch.setattr(canvas, "ALL_LAYERS_BUDGET", 0)                  # as a long input on a big model
    monkeypatch.setattr(canvas, "LAYER_BUDGET", 2 * len(result.tokens) ** 2)
    values = canvas.values(result, 1, 3, [0], "id-2")
    assert values[0]["map_layers"] == [1] and values[0]["map_heads"] == [0, 3]
    text = documents.views_document(*values, title="t", layer=0, head=1)   # sliders on what the file lacks
    assert options(text, "attention-layer") == (["2"], "2") and options(text, "attention-head") == (["0", "3"], "0")
    assert "holds the maps of layer 2, heads 0, 3 only" in html.unescape(text)


def test_views_of_different_inputs_or_none_are_refused(loaded) -> None:
    first = canvas.values(attention(loaded, TEXT), 0, 0, [0], "id-a")
    second = canvas.values(attention(loaded, "the dog"), 0, 0, [0], "id-b")
    with pytest.raises(ValueError, match="different inputs"):
        documents.views_document(first[0], first[1], second[2], title="t")
    with pytest.raises(ValueError, match="There is no heatmap to save yet"):
        documents.views_document(None, first[1], first[2], title="t")
    heads_change = canvas.head_view_value([1, 2], None)                   # a heads change: the maps the page holds
    assert "attn-head-view" in documents.views_document(first[0], heads_change, first[2], title="t")


def test_the_neuron_view_offers_the_heads_it_holds_and_starts_at_its_query(loaded, monkeypatch) -> None:
    inputs = neuron_inputs(loaded, TEXT)
    value = neuron_canvas.value(inputs, 1, 2, 3, "id-n")
    text = documents.neuron_document(value, "neuron view · tiny")
    assert options(text, "attention-layer") == (["1", "2"], "2") and options(text, "attention-head")[1] == "2"
    assert options(text, "neuron-query")[1] == "3" and "every head's query and key vectors" in html.unescape(text)
    assert "id: 'neuron-show'" in text and "ask.click()" in text      # the value's query, as a Show click's answer
    monkeypatch.setattr(neuron_canvas, "ALL_HEADS_BUDGET", 0)             # a long input: the chosen head alone
    alone = documents.neuron_document(neuron_canvas.value(inputs, 0, 1, None, "id-n"), "t")
    assert options(alone, "attention-layer") == (["1"], "1") and options(alone, "attention-head") == (["1"], "1")
    assert options(alone, "neuron-query")[1] == "0" and "layer 1, head 1 only" in alone
    with pytest.raises(ValueError, match="There is no neuron view to save yet"):
        documents.neuron_document({"kind": "maps"}, "t")


def test_numbers_join_runs() -> None:
    assert documents.numbers([1, 2, 3, 5, 7, 8]) == "1–3, 5, 7, 8"
    assert documents.numbers([4]) == "4"
