"""explorer/attention/neuron_canvas.py and the neuron view's handlers: what the page receives (every token's q and
k, float16) decodes to the engine's vectors, the row the browser computes from them equals the engine's row and
the Attention tab's to the encoding's precision, a head the page lacks comes alone, and the sizes stay small."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine.probes.attention.maps import attention
from engine.probes.attention.neuron_view import NeuronInputs, neuron_view
from explorer.attention import neuron_canvas, neuron_tab
from explorer.attention.canvas import input_id
from support.probing_helpers import make_services

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT, PAIR = "the cat sat on the mat.", "the dog ran."
HALF = 2.0 ** -11                               # float16's relative rounding


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return make_services(tiny_tokenizer)


def test_a_short_input_sends_every_head_a_long_one_the_chosen_head() -> None:
    every = neuron_canvas.chosen_heads(6, 12, 20, 32, 3, 5)                   # the bundled model, 20 tokens
    assert len(every) == 72 and every[0] == (0, 0) and every[-1] == (5, 11)
    assert neuron_canvas.chosen_heads(6, 12, 128, 32, 3, 5) == [(3, 5)]
    assert neuron_canvas.chosen_heads(24, 16, 512, 64, 20, 7) == [(20, 7)]    # bert-large, 512 tokens


def row_bounds(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, float]:
    """How far the browser's scores (S,) and weights may be from the engine's when q and k went as float16:
    each product is off by at most 2·2^-11 of |q_d k_d|, a score by the sum of those over √d, and a softmax
    weight by e^(2·largest score error) - 1."""
    scores = np.abs(q)[None, :] @ np.abs(k).T / math.sqrt(q.shape[0]) * (2.02 * HALF)   # (S,)
    return scores.ravel() + 1e-6, math.expm1(2 * float(scores.max())) + 1e-6


def test_the_browser_row_equals_the_engines_and_the_attention_tabs(services) -> None:
    """Layer 2 (from 1), head 2, query 3: decode what the page gets, compute the row as the script does."""
    value = neuron_tab.show_neuron_canvas(services, "default", TEXT, PAIR, 2, 2, 64, "3: sat")
    loaded = services.model("default")
    view = neuron_view(loaded, TEXT, PAIR, 1, 2, 3, 64)
    assert (value["layer"], value["head"], value["query"], value["tokens"]) == (1, 2, 3, view.tokens)
    assert value["head_size"] == 8 and value["scale"] == pytest.approx(1 / math.sqrt(8))
    assert value["summary"].startswith("**Layer 2, head 2, query 3 `sat`**")
    queries, keys = neuron_canvas.vectors(value, 1, 2)                         # (S, hd) each
    np.testing.assert_allclose(queries[3], view.query_vector, rtol=HALF, atol=1e-7)
    np.testing.assert_allclose(keys, view.key_vectors, rtol=HALF, atol=1e-7)
    found = neuron_canvas.row(queries[3], keys)
    score_bound, weight_bound = row_bounds(view.query_vector, view.key_vectors)
    assert np.all(np.abs(found["scores"] - view.scores) <= score_bound)
    assert np.abs(found["weights"] - view.weights).max() <= weight_bound
    assert np.abs(found["weights"] - attention(loaded, TEXT, PAIR, 64).attentions[1, 2, 3]).max() <= weight_bound
    np.testing.assert_allclose(found["products"], view.products, rtol=2.02 * HALF, atol=1e-7)


def test_a_short_input_holds_every_head_so_the_page_asks_nothing_more(services) -> None:
    value = neuron_tab.show_neuron_canvas(services, "default", TEXT, "", 1, 0, 64, 0)
    loaded = services.model("default")
    assert value["heads"] == [[layer, head] for layer in range(2) for head in range(4)]
    for layer, head in ((0, 3), (1, 1)):                                       # any head, any query token
        queries, keys = neuron_canvas.vectors(value, layer, head)
        view = neuron_view(loaded, TEXT, None, layer, head, 5, 64)
        np.testing.assert_allclose(queries[5], view.query_vector, rtol=HALF, atol=1e-7)
        np.testing.assert_allclose(keys, view.key_vectors, rtol=HALF, atol=1e-7)


def test_a_fetch_for_the_input_the_page_holds_sends_that_head_alone(services, monkeypatch) -> None:
    """The heatmap's ``neuron`` event names the input the page holds: the answer is that head's vectors and no
    query (the page keeps its own); for another input (the text was edited) the whole value comes."""
    monkeypatch.setattr(neuron_canvas, "ALL_HEADS_BUDGET", 0)                  # every input sends one head
    first = neuron_tab.show_neuron_canvas(services, "default", TEXT, "", 1, 0, 64, 2)
    assert first["heads"] == [[0, 0]]
    held = input_id(services.model("default").model, TEXT, None, 64)
    assert first["id"] == held
    answer = neuron_tab.fetch_neuron_canvas(services, "default", TEXT, "", 2, 3, 64, held)
    assert answer["id"] == held and answer["heads"] == [[1, 3]] and answer["query"] is None
    assert answer["queries"]["shape"] == [1, len(first["tokens"]), 8]
    other = neuron_tab.fetch_neuron_canvas(services, "default", TEXT + " again", "", 2, 3, 64, held)
    assert other["id"] != held and len(other["tokens"]) > len(first["tokens"])
    assert neuron_tab.fetch_neuron_canvas(services, "default", "  ", "", 2, 3, 64, held) is not None  # a skip


def test_a_bert_large_head_at_512_tokens_is_small() -> None:
    """Random vectors shaped like bert-large's at 512 tokens (head size 64): one head's value, as JSON, stays
    under 300 KB (the issue's bound for a change), q and k at 2 bytes a number."""
    rng = np.random.default_rng(0)
    shape = (2, 16, 512, 64)                                                   # (L, nh, S, hd): two layers do
    inputs = NeuronInputs(text="t", text_pair=None, source="random", tokens=["w"] * 512,
                          queries=rng.normal(size=shape).astype(np.float32),
                          keys=rng.normal(size=shape).astype(np.float32))
    value = neuron_canvas.value(inputs, 1, 7, 0, "x", heads=[(1, 7)])
    size = len(json.dumps(value))
    assert 2 * 512 * 64 * 2 * 4 / 3 <= size <= 300_000, size                   # base64 of the float16 bytes
    queries, keys = neuron_canvas.vectors(value, 1, 7)
    np.testing.assert_allclose(keys, inputs.keys[1, 7], rtol=HALF, atol=1e-7)
    with pytest.raises(KeyError, match="no vectors of layer index 0, head 7"):
        neuron_canvas.vectors(value, 0, 7)


def test_the_view_runs_the_shared_decoder_then_its_own_script() -> None:
    js = neuron_canvas.script()
    assert js.index("window.BertArrays") < js.index("window.BertNeuronView = {")
    assert js.rstrip().endswith("window.BertNeuronView.mount(element, props, trigger, watch);")
    assert "${" not in neuron_canvas.TEMPLATE and "`" not in neuron_canvas.TEMPLATE        # static
    assert "neuron-summary" in neuron_canvas.TEMPLATE            # the caption: the chosen row in words
