"""explorer/attention/canvas.py: what one answer sends the canvas views (which maps, how pooled, how big),
that the drawn colours are the exported ones, and the script each view runs."""
from __future__ import annotations

import io
import json

import gradio as gr
import numpy as np
import pytest
from PIL import Image

from engine.probes.inference import attention
from explorer.views import browser_arrays as browser_arrays
from explorer.views import canvas_view as canvas_view
from explorer.attention import canvas, export
from explorer.attention.plots import pool_map
from support.probing_helpers import make_services

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_short_input_sends_every_map_and_a_long_one_the_chosen_layer() -> None:
    assert canvas.chosen_maps(6, 12, 128, 3, 5, [0, 1]) == (list(range(6)), list(range(12)))   # default, 128
    assert canvas.chosen_maps(6, 12, 256, 3, 5, [0, 1]) == ([3], list(range(12)))               # a layer fits
    layers, heads = canvas.chosen_maps(24, 16, 512, 20, 7, [9, 2, 4, 5])                         # bert-large, 512
    assert layers == [20] and heads == [2, 7, 9] and len(heads) * 512 * 512 <= canvas.LAYER_BUDGET
    assert canvas.chosen_maps(2, 2, 2000, 1, 1, []) == ([1], [1])                                # at least the head


@pytest.mark.parametrize("layers, heads, seq_len, block", [(6, 12, 13, 1), (6, 12, 128, 3), (24, 16, 512, 26)])
def test_the_model_view_grid_is_pooled_to_its_budget(layers: int, heads: int, seq_len: int, block: int) -> None:
    assert canvas.grid_block(layers, heads, seq_len) == block
    side = -(-seq_len // block)
    assert side <= canvas.GRID_MAX_TOKENS and layers * heads * side * side <= canvas.GRID_BUDGET


def test_the_values_decode_to_the_engines_maps_pooled_and_shared_by_id(tiny_tokenizer) -> None:
    loaded = make_services(tiny_tokenizer).model("default")
    result = attention(loaded, "the cat sat on the mat because it was tired", None, 64)
    heat, head_view, model_view = canvas.values(result, 1, 2, [2, 0])
    assert heat["id"] == head_view["id"] == model_view["id"] and head_view["heads"] == [2, 0]
    assert np.abs(browser_arrays.decode(heat["maps"]) - result.attentions).max() <= 1 / 510 + 1e-6
    grid = browser_arrays.decode(model_view["grid"])
    np.testing.assert_allclose(grid, pool_map(result.attentions, model_view["block"]), atol=1 / 510 + 1e-6)
    assert len(heat["palette"]) == 256 and heat["palette"][0] == "#f7fbff" and heat["palette"][-1] == "#08306b"


def test_a_drawn_cell_is_the_colour_of_its_exported_pixel(tiny_tokenizer) -> None:
    """The canvas paints level q with palette[q]; the PNG export paints the same map with the same colours."""
    loaded = make_services(tiny_tokenizer).model("default")
    result = attention(loaded, "the cat sat on the mat", "the dog ran", 64)
    heat = canvas.heatmap_value(result, 1, 3, [], "x")
    n = len(heat["tokens"])
    levels = np.rint(browser_arrays.decode(heat["maps"]) * 255).astype(np.uint8).reshape(2, 4, n, n)[1, 3]
    png = np.asarray(Image.open(io.BytesIO(export.heatmap_png(result.attentions[1, 3], cell=1))).convert("RGB"))
    painted = np.array([[int(heat["palette"][q][k:k + 2], 16) for k in (1, 3, 5)] for q in levels.ravel()])
    np.testing.assert_array_equal(png.reshape(-1, 3), painted)


def test_each_view_runs_the_shared_script_and_names_its_events() -> None:
    for kind in canvas.KINDS:
        js = canvas.script(kind)
        assert js.rstrip().endswith(f"window.BertAttentionViews.mount('{kind}', element, props, trigger, watch);")
        assert '"fetch"' in js and '"neuron"' in js and '"both"' in js    # Gradio finds custom events quoted
    with pytest.raises(ValueError, match="unknown view"):
        canvas.script("pie")
    assert "${" not in canvas.template("heatmap") and "`" not in canvas.template("heatmap")   # static


def test_the_fetch_event_wires_like_a_gradio_listener() -> None:
    with gr.Blocks() as demo:
        view = canvas.component("heatmap", "Heatmap")
        out = gr.Textbox()
        gr.on([canvas_view.event(view, "fetch")], lambda: "asked", inputs=None, outputs=out, api_name="fetched")
    targets = [d["targets"] for d in demo.get_config_file()["dependencies"]]
    assert [(view._id, "fetch")] in [[tuple(t) for t in ts] for ts in targets]


def test_the_sliders_ask_the_server_nothing_the_views_fetch_what_they_lack(tiny_tokenizer) -> None:
    """No server event listens to the layer or head slider (the canvas views follow them in the browser); the
    heatmap's ``fetch`` runs the tab's refresh, its ``neuron`` the neuron view's and its ``both`` one answer to
    the two views."""
    from explorer.attention import tab as attention_tab
    from support.probing_helpers import tab_app

    demo, widgets = tab_app(make_services(tiny_tokenizer), attention_tab.build)
    config = demo.get_config_file()
    sliders = {widgets["layer"]._id, widgets["head"]._id}
    listening = [d["api_name"] for d in config["dependencies"]
                 if d.get("backend_fn") and any(target in sliders for target, _ in d["targets"])]
    assert listening == [], listening
    names = {tuple(t) for d in config["dependencies"] for t in d["targets"] if d.get("backend_fn")}
    heatmap = widgets["heatmap"]._id
    assert {(heatmap, "fetch"), (heatmap, "neuron"), (heatmap, "both")} <= names
    by_target = {tuple(t): d["api_name"] for d in config["dependencies"] for t in d["targets"]}
    assert by_target[(heatmap, "fetch")] == "attention_fetch"
    assert by_target[(heatmap, "neuron")] == "neuron_view_refresh"
    assert by_target[(heatmap, "both")] == "attention_fetch_both"
    both = next(d for d in config["dependencies"] if d["api_name"] == "attention_fetch_both")
    assert both["outputs"] == [heatmap, widgets["neuron"]["view"]._id]


def test_a_fetch_for_the_input_the_page_holds_sends_only_the_new_layers_maps(tiny_tokenizer, monkeypatch) -> None:
    """The heatmap's ``fetch`` names the input it holds: the answer is the heatmap's value alone (the other
    outputs are skipped); for another input (the text was edited) it is the whole answer."""
    from explorer.attention import tab as attention_tab

    monkeypatch.setattr(canvas, "ALL_LAYERS_BUDGET", 0)                  # every input sends one layer
    services = make_services(tiny_tokenizer)
    run, _ = attention_tab._main_handlers(services)
    fetch, _ = attention_tab._view_handlers(services)
    text = "the cat sat on the mat"
    first = run("default", text, "", 1, 0, 64, [0, 1], "entropy")
    assert first[0]["map_layers"] == [0]
    answer = fetch("default", text, "", 2, 3, 64, [0, 1], "entropy", gr.EventData(None, {"id": first[0]["id"]}))
    assert answer[0]["id"] == first[0]["id"] and answer[0]["map_layers"] == [1] and answer[0]["head"] == 3
    assert all(part == gr.skip() for part in answer[1:])
    other = fetch("default", text + " again", "", 2, 3, 64, [0, 1], "entropy", gr.EventData(None, {"id": first[0]["id"]}))
    assert other[0]["id"] != first[0]["id"] and other[2]["id"] == other[0]["id"] and "tokens" in other[5]


def test_a_heads_or_statistic_change_sends_no_maps(tiny_tokenizer) -> None:
    """The head view's heads come back alone (``id`` None: drawn from the maps the page holds), a statistic
    change is the statistics figure alone; neither carries an array of maps."""
    from explorer.attention import tab as attention_tab

    services = make_services(tiny_tokenizer)
    run, statistic_changed = attention_tab._main_handlers(services)
    _, heads_changed = attention_tab._view_handlers(services)
    value = heads_changed("default", [3, 1, 9])                              # head 9: not in this model
    asked = value.pop("asked")                           # when the server began it (docs/design/browser-views.md)
    assert value == canvas.head_view_value([1, 3], None) and len(json.dumps(value)) < 1_000 and asked > 0
    figure = statistic_changed("default", "the cat sat on the mat", "", 1, 0, 64, [0], "sep")
    assert '"maps"' not in figure.plot and '"z"' in figure.plot and len(figure.plot) < 50_000
    assert statistic_changed("default", "", "", 1, 0, 64, [0], "sep") == gr.skip()


def long_model(tiny_tokenizer, make_config):
    """Services whose ``default`` is a small random model that takes 512 tokens (2 layers x 4 heads)."""
    from engine.model.loaded_model import LoadedModel
    from engine.model.heads import BertWithHeads
    from explorer.models.registry import ModelRegistry
    from explorer.services import Services
    from support.reference import randomize_

    import torch
    torch.manual_seed(0)
    model = randomize_(BertWithHeads(make_config(max_position_embeddings=512), heads=("mlm",)), 0, scale=0.3).eval()
    registry = ModelRegistry(runs_root=None, default_dir=None)
    registry.pin("default", LoadedModel(model, tiny_tokenizer, model.config, "tiny model, 512 positions"))
    return Services(tokenizer=tiny_tokenizer, models=registry)


def test_at_512_tokens_a_first_answer_and_a_fetched_layer_fit_their_byte_goals(tiny_tokenizer, make_config) -> None:
    """Issue 34's goals, in bytes of JSON: a first answer's three views <= 1.5 MB, the answer to a ``fetch`` of
    another layer <= 300 KB (three 512 x 512 maps: 786 KB of uint8, deflated), and the maps still decode to the
    engine's within 1/510."""
    from explorer.attention import tab as attention_tab

    services = long_model(tiny_tokenizer, make_config)
    run, _ = attention_tab._main_handlers(services)
    fetch, _ = attention_tab._view_handlers(services)
    text = " ".join(["the cat sat on the mat because it was tired"] * 60)
    first = run("default", text, "", 1, 0, 512, [0, 1, 2, 3], "entropy")
    heat = first[0]
    assert len(heat["tokens"]) == 512 and heat["map_layers"] == [0] and len(heat["map_heads"]) == 3
    assert sum(len(json.dumps(v)) for v in first[:3]) <= 1_500_000
    change = fetch("default", text, "", 2, 1, 512, [0, 1, 2, 3], "entropy", gr.EventData(None, {"id": heat["id"]}))
    assert change[0]["map_layers"] == [1] and all(part == gr.skip() for part in change[1:])
    assert len(json.dumps(change[0])) <= 300_000
    expected = attention(services.model("default"), text, None, 512).attentions[1][change[0]["map_heads"]]
    assert np.abs(browser_arrays.decode(change[0]["maps"])[0] - expected).max() <= 1 / 510 + 1e-6
