"""explorer/embeddings/canvas.py: what one answer sends the Embeddings tab's canvas maps (which components, how
precise against the engine's numbers, how big), the colour rule the browser follows, and the events: a component
change asks the server only for a component the page lacks, answered from the kept result."""
from __future__ import annotations

import dataclasses
import json

import gradio as gr
import numpy as np
import pytest

from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult
from engine.probes.inference import embeddings
from explorer.views.browser_arrays import LEVELS, decode
from explorer.embeddings import canvas
from explorer.embeddings import tab as embeddings_tab
from explorer.embeddings import views as embeddings_views
from support.forward_counting import Forwards
from support.probing_helpers import make_services, tab_app

pytestmark = pytest.mark.usefixtures("one_thread")
PAIR = ("the cat sat on the mat", "the dog ran")


@pytest.fixture(scope="module")
def result(tiny_tokenizer) -> EmbeddingsResult:
    return embeddings(make_services(tiny_tokenizer).model("default"), *PAIR)


def test_every_component_fits_until_the_budget_then_the_chosen_one_goes_alone() -> None:
    assert canvas.components_sent(20, 384, "word") == list(COMPONENTS)                 # bundled model, short
    assert canvas.components_sent(512, 384, "word") == list(COMPONENTS)                # bundled model, 512 tokens
    assert 5 * 512 * 384 <= canvas.ALL_COMPONENTS_BUDGET < 5 * 512 * 1024
    assert canvas.components_sent(512, 1024, "sum") == ["sum"]                         # bert-large, 512 tokens
    assert canvas.components_sent(128, 1024, "sum") == list(COMPONENTS)


def test_the_maps_decode_to_the_engines_values_within_the_encodings_precision(result: EmbeddingsResult) -> None:
    value = canvas.dimensions_value(result, "output")
    assert value["id"] == canvas.result_id(result) and value["component"] == "output"
    assert value["rows"][:3] == ["0: [CLS]", "1: the", "2: cat"] and value["columns"] == result.word.shape[1]
    assert set(value["maps"]) == set(COMPONENTS)
    for name in COMPONENTS:
        entry, engine = value["maps"][name], result.component(name)                  # (S, H) float32
        assert entry["data"]["dtype"] == "uint8" and entry["offset"] == pytest.approx(float(engine.min()))
        step = (float(engine.max()) - float(engine.min())) / LEVELS
        assert canvas.map_precision(entry) == pytest.approx(step / 2, rel=1e-3, abs=1e-6)
        assert np.abs(canvas.decoded(entry) - engine).max() <= canvas.map_precision(entry)
        assert entry["limit"] == pytest.approx(float(np.quantile(np.abs(engine), 0.99)), rel=1e-5)
    similarity = canvas.similarity_value(result.position_similarity)
    entry = similarity["maps"]["cosine"]
    assert entry["data"]["dtype"] == "float16" and (entry["offset"], entry["limit"]) == (0.0, 1.0)
    assert np.abs(canvas.decoded(entry) - result.position_similarity).max() <= 2.0 ** -11 + 1e-6
    assert similarity["rows"] == [str(i) for i in range(result.num_positions)]


def test_the_colour_rule_is_the_diverging_palette_around_zero() -> None:
    palette = canvas.palette()
    assert len(palette) == 256 and palette[0] == "#053061" and palette[-1] == "#67001f"    # RdBu_r: blue .. red
    assert all(int(palette[i][1:3], 16) > 240 for i in (127, 128))                        # white-ish at 0
    levels = canvas.levels(np.array([-5.0, -2.0, 0.0, 1.0, 2.0, 9.0]), 2.0)
    assert levels.tolist() == [0, 0, 128, 191, 255, 255]                                  # clipped at ±limit
    assert canvas.color_limit(np.zeros((3, 4))) == 1.0
    assert canvas.color_limit(np.r_[np.linspace(-1, 1, 999), 100.0]) < 1.01             # an outlier saturates


def test_a_long_input_on_a_wide_model_sends_one_component_of_one_byte_a_value(result: EmbeddingsResult) -> None:
    """bert-large's shape at 512 tokens: the chosen component alone, uint8, deflated when that helps; the JSON
    is at most 4/3 of a byte per value (base64) and a little text."""
    rng = np.random.default_rng(0)
    wide = {name: rng.normal(0, 1, (512, 1024)).astype(np.float32) for name in ("word", "position", "segment")}
    big = dataclasses.replace(result, tokens=["[CLS]"] + ["x"] * 511, **wide, summed=sum(wide.values()),
                              output=wide["word"])
    value = canvas.dimensions_value(big, "sum")
    assert list(value["maps"]) == ["sum"] and value["maps"]["sum"]["data"]["shape"] == [512, 1024]
    assert len(json.dumps(value)) <= 4 / 3 * 512 * 1024 + 30_000
    np.testing.assert_allclose(canvas.decoded(value["maps"]["sum"]), big.summed,
                               atol=canvas.map_precision(value["maps"]["sum"]))


def test_a_component_change_asks_only_for_what_the_page_lacks_from_the_kept_result(tiny_tokenizer,
                                                                                   result: EmbeddingsResult) -> None:
    services = make_services(tiny_tokenizer)
    demo, widgets = tab_app(services, embeddings_tab.build)
    radio, view = widgets["component"], widgets["heatmap"]
    listened = {(t[0], t[1]) for fn in demo.fns.values() for t in fn.targets}
    assert not any(block == radio._id for block, _ in listened)          # the radio itself asks the server nothing
    fetch = next(fn for fn in demo.fns.values() if (view._id, "fetch") in [(t[0], t[1]) for t in fn.targets])
    assert fetch.api_name == "embeddings_component" and fetch.api_visibility == "private"
    assert [b._id for b in fetch.inputs] == [radio._id, widgets["state"]._id]
    assert [b._id for b in fetch.outputs] == [view._id]
    *_, kept = embeddings_views.show_embeddings(services, "default", *PAIR, None, "output", "all")
    counted = Forwards(services.model("default"))
    answer = fetch.fn("segment", kept)                                   # the page's key: no arrays kept per page
    assert counted.count == 0                                            # found again in the forward cache
    assert list(answer["maps"]) == ["segment"] and answer["id"] == canvas.result_id(result)
    assert np.abs(canvas.decoded(answer["maps"]["segment"]) - result.segment).max() <= \
        canvas.map_precision(answer["maps"]["segment"])
    services.forward_cache.clear()                                       # let go (other visitors, the bound)
    again = fetch.fn("segment", kept)                                    # computed again, the same numbers
    assert counted.count == 1 and again["id"] == answer["id"] and again["maps"] == answer["maps"]
    assert fetch.fn("segment", None) == gr.skip()                        # nothing shown yet
    with pytest.raises(gr.Error, match="Unknown component"):
        fetch.fn("../etc", kept)


def test_each_view_runs_the_shared_decoder_and_its_mount() -> None:
    for kind in canvas.KINDS:
        js = canvas.script(kind)
        assert "window.BertArrays" in js and '"fetch"' in js              # Gradio finds custom events quoted
        assert js.rstrip().endswith(f"window.BertEmbeddingsViews.mount('{kind}', element, props, trigger, watch);")
        assert "${" not in canvas.template(kind) and "`" not in canvas.template(kind)    # static
    with pytest.raises(ValueError, match="unknown view"):
        canvas.script("pie")
    with pytest.raises(ValueError, match="square"):
        canvas.similarity_value(np.zeros((2, 3)))
    assert decode(canvas.signed_map(np.zeros((0, 4)))["data"]).shape == (0, 4)
