"""explorer/attention/joined_fetch.py and ``canvas.heatmap_within``: a layer or head change that both the heatmap and
the neuron view lack comes as one answer within ``canvas.CHANGE_BUDGET`` (the issue's 300 KB for a change, less
Gradio's framing): the head's vectors and as many of the layer's maps as fit, the chosen head's first; the maps
and vectors still decode to the engine's; another input gets the neuron view's whole value and no maps."""
from __future__ import annotations

import json

import gradio as gr
import numpy as np
import pytest
import torch

from engine.model.heads import BertWithHeads
from engine.model.loaded_model import LoadedModel
from engine.probes.attention.neuron_view import neuron_view
from engine.probes.inference import attention
from explorer.attention import canvas, joined_fetch, neuron_canvas
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from explorer.views import browser_arrays

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = " ".join(["the cat sat on the mat because it was tired"] * 60)      # past 512 tokens: cut to 512
HALF = 2.0 ** -11                               # float16's relative rounding


@pytest.fixture(scope="module")
def services(tiny_tokenizer, make_config) -> Services:
    """``default``: bert-large's head shape (16 heads of size 64, hidden 1024; one layer, a narrow feed-forward,
    random weights as a fresh model has them), 512 positions."""
    torch.manual_seed(0)
    config = make_config(hidden_size=1024, num_attention_heads=16, num_hidden_layers=2, intermediate_size=64,
                         max_position_embeddings=512)
    model = BertWithHeads(config, heads=("mlm",)).eval()
    registry = ModelRegistry(runs_root=None, default_dir=None)
    registry.pin("default", LoadedModel(model, tiny_tokenizer, config, "bert-large heads, 512 positions"))
    return Services(tokenizer=tiny_tokenizer, models=registry)


def held_id(services: Services, text: str = TEXT) -> str:
    return canvas.input_id(services.model("default").model, text, None, 512)


def test_a_change_both_views_lack_is_one_answer_within_the_budget(services) -> None:
    """Layer 2, head 5 at 512 tokens: apart, three maps (~130 KB) and the head's vectors (~175 KB) were over 300
    KB; joined, that head's vectors and the maps that fit, head 5's first, decoding to the engine's numbers."""
    heat, neuron = joined_fetch.fetch_both(services, "default", TEXT, "", 2, 5, 512, [0, 1, 2, 3], held_id(services))
    size = len(json.dumps(heat)) + len(json.dumps(neuron))
    assert size <= canvas.CHANGE_BUDGET, size
    assert heat["id"] == neuron["id"] == held_id(services) and len(heat["tokens"]) == 512
    assert heat["map_layers"] == [1] and 5 in heat["map_heads"]
    assert set(heat["map_heads"]) <= {5, 0, 1} and len(heat["map_heads"]) < 3          # fewer than a fetch sends
    assert neuron["heads"] == [[1, 5]] and neuron["query"] is None                   # the page keeps its query
    loaded = services.model("default")
    maps = attention(loaded, TEXT, None, 512).attentions[1][heat["map_heads"]]
    assert np.abs(browser_arrays.decode(heat["maps"]) - maps).max() <= 1 / 510 + 1e-6
    view = neuron_view(loaded, TEXT, None, 1, 5, 7, 512)
    queries, keys = neuron_canvas.vectors(neuron, 1, 5)
    np.testing.assert_allclose(queries[7], view.query_vector, rtol=HALF, atol=1e-6)
    np.testing.assert_allclose(keys, view.key_vectors, rtol=HALF, atol=1e-6)


def test_the_heatmap_keeps_the_maps_that_fit_the_room_the_chosen_head_first(services) -> None:
    result = attention(services.model("default"), TEXT, None, 512)
    full = canvas.heatmap_value(result, 1, 5, [9, 2], "x")
    assert full["map_layers"] == [1] and full["map_heads"] == [2, 5, 9]
    assert canvas.heatmap_within(result, 1, 5, [9, 2], "x", 10_000_000) == full         # room for all
    one = canvas.heatmap_within(result, 1, 5, [9, 2], "x", 0)                           # no room: the head alone
    assert one["map_heads"] == [5]
    two = canvas.heatmap_within(result, 1, 5, [9, 2], "x", len(json.dumps(one)) + 1_000 + len(one["maps"]["data"]))
    assert two["map_heads"] == [5, 9]                                                   # then the view's first
    short = attention(services.model("default"), "the cat sat", None, 512)             # every layer fits
    assert canvas.heatmap_value(short, 1, 5, [], "y")["map_layers"] == [0, 1]
    assert canvas.heatmap_within(short, 1, 5, [], "y", 0)["map_layers"] == [1]


def test_another_input_gets_the_neuron_views_whole_value_and_no_maps(services) -> None:
    """The text was edited since the page's answer: the neuron view's value for the new text (the page then asks
    the heatmap's ``fetch``); an empty text changes nothing."""
    heat, neuron = joined_fetch.fetch_both(services, "default", "the dog ran", "", 1, 0, 512, [0], held_id(services))
    assert heat == gr.skip() and neuron["id"] == held_id(services, "the dog ran") != held_id(services)
    assert joined_fetch.fetch_both(services, "default", " ", "", 1, 0, 512, [0], "x") == (gr.skip(), gr.skip())
