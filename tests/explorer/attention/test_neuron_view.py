"""The Attention tab's neuron view: its Plotly figures (pure builders, for Python callers), its handlers (equal to
``engine.probes.attention.neuron_view``), the query choices that follow the tab's tokens, and ``/neuron_view`` served (the
canvas's value: tests/explorer/attention/test_neuron_canvas.py)."""
from __future__ import annotations

from collections.abc import Iterator

import gradio as gr
import numpy as np
import pytest
from gradio_client import Client

from support.app_helpers import serve
from engine.probes.attention.maps import attention
from engine.probes.attention.neuron_view import neuron_view
from explorer.attention import neuron_canvas, neuron_plots, neuron_tab
from explorer.attention import tab as attention_tab
from explorer.ui_errors import friendly_errors
from support.probing_helpers import make_services, small_app

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT, PAIR = "the cat sat on the mat.", "the dog ran."
TOKENS = ["[CLS]", "the", "cat", "the", "[SEP]"]


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return make_services(tiny_tokenizer)


def test_vectors_figure_draws_the_query_every_key_and_their_products() -> None:
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=4), rng.normal(size=(5, 4))
    fig = neuron_plots.vectors_figure(TOKENS, 2, q, k, q * k, masked=[False] * 4 + [True], title="t")
    query, keys, products = fig.data
    np.testing.assert_allclose(np.asarray(query.z), q[None, :], atol=1e-6)
    np.testing.assert_allclose(np.asarray(keys.z), k, atol=1e-6)
    np.testing.assert_allclose(np.asarray(products.z), q * k, atol=1e-6)
    assert list(fig.layout.yaxis2.ticktext) == ["0: [CLS]", "1: the", "2: cat", "3: the", "4: [SEP] (padding)"]
    assert list(fig.layout.yaxis.ticktext) == ["q · 2: cat"]
    size = float(np.abs(np.concatenate([q, k.ravel()])).max())
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == pytest.approx((-size, size))   # centred on 0
    assert fig.layout.coloraxis2.cmax == pytest.approx(float(np.abs(q * k).max()))
    with pytest.raises(ValueError, match="one row per token"):
        neuron_plots.vectors_figure(TOKENS, 0, q, k[:3], q * k)
    with pytest.raises(ValueError, match="query position 5 is outside the 5 tokens"):
        neuron_plots.vectors_figure(TOKENS, 5, q, k, q * k)


def test_scores_figure_draws_the_scores_and_the_row() -> None:
    scores, weights = [1.0, -0.5, 2.0, 0.0, -3.0], [0.2, 0.1, 0.7, 0.0, 0.0]
    fig = neuron_plots.scores_figure(TOKENS, 1, scores, weights, masked=[False, False, False, False, True])
    bars, row = fig.data
    assert list(bars.x) == list(range(5)) and list(bars.y) == scores
    assert list(bars.marker.color) == [neuron_plots.UP, neuron_plots.DOWN, neuron_plots.UP, neuron_plots.DOWN,
                                       "#9aa0a6"]
    assert list(row.y) == pytest.approx(weights) and fig.layout.yaxis2.rangemode == "tozero"
    assert list(fig.layout.xaxis2.ticktext) == TOKENS
    assert "query 1: the" in fig.layout.annotations[0].text
    with pytest.raises(ValueError, match="4 scores and 5 weights for 5 tokens"):
        neuron_plots.scores_figure(TOKENS, 0, scores[:4], weights)


def test_the_handler_equals_the_engine_and_the_attention_row(services) -> None:
    """Layer 2 in the UI (the layers count from 1) is the engine's second attention layer, index 1."""
    summary, vectors, scores = neuron_tab.show_neuron_view(services, "default", TEXT, PAIR, 2, 2, 64, "3: sat")
    loaded = services.model("default")
    view = neuron_view(loaded, TEXT, PAIR, 1, 2, 3, 64)
    np.testing.assert_allclose(np.asarray(vectors.data[1].z), view.key_vectors, atol=1e-7)
    np.testing.assert_allclose(np.asarray(scores.data[0].y), view.scores, atol=1e-7)
    np.testing.assert_allclose(np.asarray(scores.data[1].y), attention(loaded, TEXT, PAIR).attentions[1, 2, 3],
                               atol=1e-6)
    assert summary.startswith("**Layer 2, head 2, query 3 `sat`** · head size 8, so each score is Σ(q ⊙ k) × 0.354")
    assert vectors.layout.title.text.startswith("Layer 2, head 2")


@pytest.mark.parametrize("value,expected", [(None, 0), ("", 0), (3, 3), (3.0, 3), ("3", 3), ("12: cat", 12)])
def test_the_query_is_read_from_the_dropdown_or_the_api(value, expected) -> None:
    assert neuron_tab.parse_query(value) == expected


@pytest.mark.parametrize("layer,head,query,match", [
    (3, 0, 0, "layer 3 does not exist: this model has 2 layers, numbered 1 to 2"),
    (0, 0, 0, "layer 0 is the embeddings' output, before any attention: the layers with attention heads are "
              "numbered 1 to 2"),
    (1, 9, 0, "head 9 does not exist: each layer has 4 heads, numbered 0 to 3"),
    (1, 0, 40, "query token 40 does not exist: the input has 9 tokens, numbered 0 to 8"),
    (1, 0, -1, "The query token \\(0 = \\[CLS\\]\\) must be a whole number of at least 0, got -1"),
    (1, 0, 1.5, "The query token \\(0 = \\[CLS\\]\\) must be a whole number of at least 0, got 1.5"),
    (1, 0, "cat", "The query token \\(0 = \\[CLS\\]\\) must be a whole number, got 'cat'"),
    (1, 0, True, "must be a whole number, got True"),
])
@pytest.mark.parametrize("show", [neuron_tab.show_neuron_canvas, neuron_tab.show_neuron_view])
def test_bad_layer_head_or_query_is_a_clear_error(services, show, layer, head, query, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(show)(services, "default", TEXT, None, layer, head, 64, query)


def test_the_query_choices_are_the_tabs_tokens(services) -> None:
    update = neuron_tab.query_choices(services, "default", TEXT, None, 64, 5)
    assert update["choices"][:3] == [("0: [CLS]", 0), ("1: the", 1), ("2: cat", 2)] and update["value"] == 5
    assert neuron_tab.query_choices(services, "default", "the cat.", None, 64, 9)["value"] == 0   # gone: [CLS]
    assert neuron_tab.query_choices(services, "default", "", None, 64, 0) is not None            # a skip


@pytest.fixture(scope="module")
def client(services) -> Iterator[Client]:
    with serve(small_app(services, attention_tab.build)) as client:
        yield client


def test_served_neuron_view_gives_the_engines_numbers(client, services) -> None:
    """``/neuron_view`` answers one dict: the summary and every token's q and k (float16, decodable)."""
    value = client.predict(model_key="default", text=TEXT, text_pair="", layer=1, head=1, max_length=64, query=2,
                           api_name="/neuron_view")
    view = neuron_view(services.model("default"), TEXT, None, 0, 1, 2, 64)      # the engine's first layer: index 0
    assert value["summary"].startswith("**Layer 1, head 1, query 2 `cat`**")
    assert (value["layer"], value["head"], value["query"], value["tokens"]) == (0, 1, 2, view.tokens)
    queries, keys = neuron_canvas.vectors(value, 0, 1)
    np.testing.assert_allclose(queries[2], view.query_vector, rtol=2.0 ** -11, atol=1e-7)
    np.testing.assert_allclose(keys, view.key_vectors, rtol=2.0 ** -11, atol=1e-7)
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert [p["parameter_name"] for p in endpoints["/neuron_view"]["parameters"]] == [
        "model_key", "text", "text_pair", "layer", "head", "max_length", "query"]
    assert "/neuron_view_refresh" not in endpoints
    with pytest.raises(Exception, match="query token 99 does not exist"):
        client.predict(model_key="default", text=TEXT, text_pair="", layer=1, head=1, max_length=64, query=99,
                       api_name="/neuron_view")


def test_neuron_figures_write_roberta_tokens_as_entities() -> None:
    tokens = ["<s>", "Ġthe", "<mask>", "</s>"]
    q, k = np.ones(3), np.ones((4, 3))
    vectors = neuron_plots.vectors_figure(tokens, 2, q, k, q * k)
    assert list(vectors.layout.yaxis2.ticktext) == ["0: &lt;s&gt;", "1: Ġthe", "2: &lt;mask&gt;", "3: &lt;/s&gt;"]
    assert list(vectors.layout.yaxis.ticktext) == ["q · 2: &lt;mask&gt;"]
    assert vectors.data[0].customdata[0][0] == "2: &lt;mask&gt;" and vectors.data[1].customdata[3][0] == "3: &lt;/s&gt;"
    scores = neuron_plots.scores_figure(tokens, 0, [1.0, 0.5, 0.0, -1.0], [0.4, 0.3, 0.2, 0.1])
    assert [row[0] for row in scores.data[1].customdata] == list(vectors.layout.yaxis2.ticktext)
    assert "query 0: &lt;s&gt;" in scores.layout.annotations[0].text
    shown = [*vectors.layout.yaxis2.ticktext, *(row[0] for row in scores.data[0].customdata),
             *(a.text for a in scores.layout.annotations)]
    assert not any(tag in text for text in shown for tag in ("<s>", "</s>", "<mask>"))
