"""explorer/forward_cache.py: the setting, the visitor, and that the Attention and Embeddings tabs run the model
once per input: a layer, head, head-view, statistic or query change (the refresh endpoints) reads the kept forward,
a text change or a new model object runs it again. Forwards are counted with a hook on the model's encoder."""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gradio.context import LocalContext  # noqa: E402

from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.probes.attention.maps import attention  # noqa: E402
from engine.probes.representations.embeddings import embeddings  # noqa: E402
from engine.probes.attention.neuron_view import neuron_view  # noqa: E402
from explorer import forward_cache  # noqa: E402
from explorer.attention import neuron_tab, tab as attention_tab  # noqa: E402
from explorer.attention import views as attention_views  # noqa: E402
from explorer.attention.actions import export_files  # noqa: E402
from explorer.embeddings import tab as embeddings_tab  # noqa: E402
from explorer.embeddings.shown import result_of
from explorer.services import Services  # noqa: E402
from support.forward_counting import Forwards, pinned_services, tiny_loaded  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT, OTHER = "the cat sat on the mat", "a dog ran in the park"


def _loaded(tokenizer, seed: int = 0) -> LoadedModel:
    return tiny_loaded(tokenizer, ("mlm",), seed)




@pytest.fixture()
def services(tiny_tokenizer) -> Services:
    return pinned_services(tiny_tokenizer, _loaded(tiny_tokenizer))


def test_the_setting_reads_megabytes_and_keeps_the_default_when_unreadable() -> None:
    assert forward_cache.cache_bytes({}) == 512 * 2**20
    assert forward_cache.cache_bytes({"EXPLORER_FORWARD_CACHE_MB": "64"}) == 64 * 2**20
    assert forward_cache.cache_bytes({"EXPLORER_FORWARD_CACHE_MB": "0"}) == 0
    for bad in ("lots", "nan", "inf"):
        assert forward_cache.cache_bytes({"EXPLORER_FORWARD_CACHE_MB": bad}) == 512 * 2**20
    cache = forward_cache.cache_from_env({"EXPLORER_FORWARD_CACHE_MB": "1"})
    assert cache.max_bytes == 2**20 and cache.per_visitor == forward_cache.ENTRIES_PER_VISITOR


def test_the_visitor_is_the_requests_session() -> None:
    assert forward_cache.visitor() == ""                                  # outside a request
    token = LocalContext.request.set(gr.Request(session_hash="abc123"))   # what Gradio sets for each event
    try:
        assert forward_cache.visitor() == "abc123"
    finally:
        LocalContext.request.reset(token)


def test_lookup_and_keep_are_per_visitor_and_per_model(services: Services) -> None:
    cache, model = services.forward_cache, services.model("default").model
    kept = {"logits": np.arange(4, dtype=np.float32)}
    assert forward_cache.lookup(cache, model, ("qa", "q", "c")) is None
    assert forward_cache.keep(cache, model, ("qa", "q", "c"), kept)
    assert forward_cache.lookup(cache, model, ("qa", "q", "c")) is kept
    assert forward_cache.lookup(cache, object(), ("qa", "q", "c")) is None        # another model object
    token = LocalContext.request.set(gr.Request(session_hash="someone-else"))
    try:
        assert forward_cache.lookup(cache, model, ("qa", "q", "c")) is None    # another visitor
    finally:
        LocalContext.request.reset(token)
    assert not forward_cache.keep(forward_cache.cache_from_env({"EXPLORER_FORWARD_CACHE_MB": "0"}), model, "k", kept)


def test_attention_runs_the_model_once_per_input(services: Services) -> None:
    run, refresh = attention_tab._main_handlers(services)
    forwards = Forwards(services.model("default"))
    run("default", TEXT, "", 1, 0, 128, None, "entropy")
    assert forwards.count == 1
    refresh("default", TEXT, "", 2, 3, 128, None, "entropy")             # layer and head
    refresh("default", TEXT, "", 2, 3, 128, [0, 1], "sep")               # the head view's heads, the statistic
    export_files(services, "default", TEXT, "", 1, 2, 128)               # the export reads it too
    assert forwards.count == 1
    refresh("default", OTHER, "", 2, 3, 128, None, "entropy")            # new text: one more forward
    refresh("default", TEXT, "", 2, 3, 32, None, "entropy")              # another length is another input
    assert forwards.count == 3


def test_a_visitor_has_its_own_entries(services: Services) -> None:
    forwards = Forwards(services.model("default"))
    for session in ("one", "two", "one"):
        token = LocalContext.request.set(gr.Request(session_hash=session))
        try:
            attention_views.show_attention(services, "default", TEXT, "", 1, 0)
        finally:
            LocalContext.request.reset(token)
    assert forwards.count == 2 and len(services.forward_cache) == 2


def test_the_numbers_drawn_from_the_cache_are_the_engines(services: Services) -> None:
    """The cache keeps the engine's float32 maps as they are (no float16 rounding): equal bit for bit."""
    loaded = services.model("default")
    expected = attention(loaded, TEXT, None, 64)     # the tab caps 128 at the model's 64
    attention_views.show_attention(services, "default", TEXT, "", 1, 0)                 # fills the cache
    heat, head_view, model_view, stats, table, _ = attention_views.show_attention(services, "default", TEXT, "", 2, 3,
                                                                                  128, None, "distance")
    np.testing.assert_array_equal(np.asarray(heat.data[0].z, dtype=np.float32), expected.attentions[1, 3])
    np.testing.assert_array_equal(np.asarray(stats.data[0].z, dtype=float), expected.stats.distance)
    assert expected.attentions.dtype == np.float32


def test_a_new_model_object_runs_the_model_again(services: Services, tiny_tokenizer) -> None:
    """A reloaded checkpoint or a new live snapshot is a new object: its maps are its own."""
    first = attention_views.show_attention(services, "default", TEXT, "", 1, 0)[0]
    services.registry().pin("default", _loaded(tiny_tokenizer, seed=1))
    forwards = Forwards(services.model("default"))
    second = attention_views.show_attention(services, "default", TEXT, "", 1, 0)[0]
    assert forwards.count == 1
    assert not np.array_equal(np.asarray(first.data[0].z), np.asarray(second.data[0].z))


def test_the_neuron_view_runs_the_model_once_per_input(services: Services) -> None:
    loaded = services.model("default")
    forwards = Forwards(loaded)
    neuron_tab.show_neuron_view(services, "default", TEXT, "", 1, 0, 128, 1)
    for layer, head, query in ((2, 3, 1), (1, 1, 4), (2, 0, 0)):
        summary, vectors, scores = neuron_tab.show_neuron_view(services, "default", TEXT, "", layer, head, 128, query)
        view = neuron_view(loaded, TEXT, None, layer - 1, head, query, 64)        # the engine, run directly
        np.testing.assert_array_equal(np.asarray(scores.data[0].y, dtype=np.float32), view.scores)
    assert forwards.count == 1 + 3                                                  # the three direct runs
    neuron_tab.show_neuron_view(services, "default", OTHER, "", 1, 0, 128, 1)
    assert forwards.count == 5


def test_the_embeddings_layer_change_runs_no_model(services: Services) -> None:
    loaded = services.model("default")
    run, refresh = embeddings_tab._main_handlers(services)
    forwards = Forwards(loaded)
    run("default", TEXT + " the cat", "", 2, "word", "all")
    for layer in (0, 1, 2):
        outputs = refresh("default", TEXT + " the cat", "", layer, "output", "all")
        assert forwards.count == 1
        result = result_of(services, outputs[-1])                                   # the page's key: cached
        expected = embeddings(loaded, TEXT + " the cat", None, layer=layer, max_length=64)
        np.testing.assert_array_equal(result.contextual, expected.contextual)
        np.testing.assert_array_equal(result.contextual_pca, expected.contextual_pca)
        assert [r.contextual_cosine for r in result.repeats] == [r.contextual_cosine for r in expected.repeats]
        assert result.repeats and result.layer == layer
        forwards.count -= 1                                                         # the direct run above
    refresh("default", OTHER, "", 1, "output", "all")
    assert forwards.count == 2
