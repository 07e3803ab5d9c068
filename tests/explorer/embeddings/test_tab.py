"""The Embeddings tab (``tab.py``, ``views.py``): handlers and views directly, then in-process via gradio_client
(/embeddings, /embeddings_over_training)."""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from support.app_helpers import serve  # noqa: E402
from conftest import tiny_config  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult  # noqa: E402
from engine.probes.inference import embeddings  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from explorer.models.choices import ModelChoice  # noqa: E402
from explorer.models.registry import ModelRegistry  # noqa: E402
from engine.training.runs.state import write_checkpoint  # noqa: E402
from engine.training.runs.run_folder import CHECKPOINTS_DIR, checkpoint_name
from explorer.models import picker as model_picker  # noqa: E402
from explorer.embeddings import canvas as embeddings_canvas  # noqa: E402
from explorer.embeddings import plots as embeddings_plots  # noqa: E402
from explorer.embeddings import sections as embeddings_sections  # noqa: E402
from explorer.embeddings import tab as embeddings_tab  # noqa: E402
from explorer.embeddings import views as embeddings_views  # noqa: E402
from explorer.embeddings.shown import ShownInput, parse_layer, result_of  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.reference import randomize_  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

RUN = "emb-run"
STEPS = (3, 6, 9)
PAIR = ("the cat sat on the mat", "the dog ran")


def _model(seed: int, heads: tuple[str, ...] = ("mlm", "nsp")) -> BertWithHeads:
    torch.manual_seed(seed)
    return randomize_(BertWithHeads(tiny_config(), heads=heads), seed).eval()


def _services(tokenizer, runs_root: Path | None) -> Services:
    registry = ModelRegistry(runs_root=runs_root, default_dir=None)
    model = _model(0)
    registry.pin("default", LoadedModel(model, tokenizer, model.config, "tiny test model"))
    bare = _model(1, heads=())
    registry.pin("encoder", LoadedModel(bare, tokenizer, bare.config, "tiny encoder"))
    return Services(tokenizer=tokenizer, models=registry)


@pytest.fixture(scope="module")
def runs_root(tiny_tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    for i, step in enumerate(STEPS):
        write_checkpoint(_model(10 + i), tiny_tokenizer, root / RUN / CHECKPOINTS_DIR / checkpoint_name(step),
                         state={"step": step}, info={"step": step, "created": time.time() + i})
    return root


@pytest.fixture(scope="module")
def services(tiny_tokenizer, runs_root: Path) -> Services:
    return _services(tiny_tokenizer, runs_root)


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[Client]:
    with gr.Blocks(analytics_enabled=False) as demo:
        picker = model_picker.build(services)
        with gr.Tab("Embeddings"):
            embeddings_tab.build(services, picker)
    with serve(demo) as running:
        yield running


# --- handlers, directly ------------------------------------------------------------------

def test_show_embeddings_builds_every_output(services: Services) -> None:
    out = embeddings_views.show_embeddings(services, "default", *PAIR, 1, "word", "all")
    summary, norms, heatmap, pos_sim, pos_pca, ctx_pca, seg, table, token, kept = out
    assert isinstance(kept, ShownInput) and kept.layer == 1 and kept.result_id == heatmap["id"]   # a key, no arrays
    result = result_of(services, kept)
    assert isinstance(result, EmbeddingsResult) and result.layer == 1
    assert all(isinstance(f, go.Figure) for f in (norms, pos_pca, ctx_pca, seg))
    assert (heatmap["kind"], heatmap["component"], pos_sim["kind"]) == ("dimensions", "word", "similarity")
    assert "**12 tokens** (A: 6, B: 3, special: 3)" in summary and "layer 1 of 2" in summary
    assert "`the` at positions 1 and 5" in summary and "max difference" in summary
    assert list(table.columns) == embeddings_plots.NEIGHBOUR_COLUMNS and len(table) == 12 * 8
    assert token["value"] == "all" and token["choices"][2] == ("0: [CLS]", "0")
    assert "word" in heatmap["titles"]["word"] and heatmap["rows"][1] == "1: the"


def test_summary_flags_a_mismatch_and_truncation(services: Services) -> None:
    *_, kept = embeddings_views.show_embeddings(services, "default", " ".join(["the cat"] * 40), "", 1, "word", "all")
    result = result_of(services, kept)
    summary = embeddings_views.summary_markdown(result)
    assert "truncated" in summary and "max length 64" in summary and "equals the model's own" in summary
    odd = dataclasses.replace(result, output_max_diff=0.3)
    assert "differs from the model's embedding output" in embeddings_views.summary_markdown(odd)


def test_token_choice_filters_neighbours(services: Services) -> None:
    *_, table, token, kept = embeddings_views.show_embeddings(services, "default", "the cat", "", None, "output", "2")
    result = result_of(services, kept)
    assert set(table["position"]) == {2} and set(table["token"]) == {"cat"} and token["value"] == "2"
    assert result.layer == result.num_layers                                  # None = last layer
    with pytest.warns(UserWarning, match="not in this input"):
        assert embeddings_views.parse_token("7", 4) is None                     # stale position: all tokens
    assert embeddings_views.parse_token("3: cat", 4) == 3
    with pytest.raises(gr.Error, match="neither"):
        embeddings_views.parse_token("cat", 4)


def test_the_neighbours_open_on_the_first_word_not_cls(services: Services) -> None:
    """The token choice's default is the text's first word: its neighbours, not [CLS]'s, and the dropdown names it."""
    assert embeddings_sections.token_choices(["[CLS]"])[0] == ("First word of the text", embeddings_sections.FIRST_WORD)
    *_, table, token, kept = embeddings_views.show_embeddings(services, "default", *PAIR, 1, "word",
                                                                 embeddings_sections.FIRST_WORD)
    result = result_of(services, kept)
    assert result.tokens[:2] == ["[CLS]", "the"] and set(table["position"]) == {1} and set(table["token"]) == {"the"}
    assert token["value"] == "1"
    assert embeddings_views.first_word(["special", "special", "A"]) == 2 and embeddings_views.first_word(["special"]) is None
    assert embeddings_views.chosen_position("all", result) is None                  # "all" still means every token


def test_the_layer_control_redraws_what_it_controls(services: Services) -> None:
    """The layer slider (a drag, the arrow keys, a typed number) reruns the tab: the summary and the contextual
    PCA then name the new layer; with no text typed, moving it runs nothing."""
    with gr.Blocks(analytics_enabled=False) as demo:
        picker = model_picker.build(services)
        widgets = embeddings_tab.build(services, picker)
    layer, text = widgets["layer"], widgets["text"]
    changes = [fn for fn in demo.fns.values() if (layer._id, "change") in [(t[0], t[1]) for t in fn.targets]]
    assert len(changes) == 1 and changes[0].api_name == "embeddings_refresh"
    refresh = changes[0]
    assert [block._id for block in refresh.inputs] == [picker.dropdown._id, text._id, widgets["pair"]._id, layer._id,
                                                       widgets["component"]._id, widgets["token"]._id,
                                                       widgets["state"]._id]
    shown = [widgets[name]._id for name in embeddings_tab.SHOWN] + [widgets["token"]._id, widgets["state"]._id]
    assert [block._id for block in refresh.outputs] == shown and refresh.trigger_mode == "always_last"
    skipped = refresh.fn("default", "  ", "", 2, "output", "all", None)
    assert len(skipped) == len(shown) and all(value == gr.skip() for value in skipped)
    held = None
    for index in (0, 2):
        out = refresh.fn("default", *PAIR, index, "output", "all", held)
        summary, *_, contextual, _, _, _, kept = out
        result = result_of(services, kept)
        where = "the embedding output (layer 0)" if index == 0 else "layer 2 of 2"
        assert result.layer == index and f"contextual view at {where}" in summary
        assert contextual.layout.title.text.endswith("the embedding output" if index == 0 else "layer 2")
        # the first call (no result held) sends every view; the layer change on the same input only what moves
        sent = [name for name, value in zip([*embeddings_tab.SHOWN, "token"], out)
                if not (isinstance(value, dict) and value == gr.skip())]
        assert sent == (["summary", "contextual_pca"] if held is not None else [*embeddings_tab.SHOWN, "token"])
        held = kept
    other = refresh.fn("default", "the dog ran", "", 1, "output", "all", held)    # another input: every view
    assert other[2]["kind"] == "dimensions" and other[2]["rows"][1] == "1: the"


@pytest.mark.parametrize("layer, message", [(1001, "Layer must be a whole number from 0 to 1,000, got 1001"),
                                            (-1, "from 0 to 1,000, got -1"), (1.5, "whole number")])
def test_parse_layer(layer: float, message: str) -> None:
    with pytest.raises(gr.Error, match=message):
        parse_layer(layer, 2)
    assert parse_layer(2.0, 2) == 2 and parse_layer(None, 2) == 2


def test_a_layer_past_the_models_last_shows_the_last_with_a_warning() -> None:
    """The slider can still hold a layer of the model picked before (6 of the default model when a 2-layer one is
    loaded): the last layer is shown, and a warning says so, instead of an error."""
    with pytest.warns(UserWarning, match="This model has 2 layers: showing the last one"):
        assert parse_layer(6, 2) == 2


def test_headless_encoder_works(services: Services) -> None:
    *_, kept = embeddings_views.show_embeddings(services, "encoder", "the dog", "", 0, "sum", "all")
    result = result_of(services, kept)
    assert result.source == "tiny encoder" and result.layer == 0


def test_heatmap_component_is_validated(services: Services) -> None:
    with pytest.raises(gr.Error, match="Unknown component"):
        embeddings_views.show_embeddings(services, "default", "the cat", "", 1, "nope", "all")
    assert embeddings_views.heatmap_value(None, "word") == gr.skip()           # nothing shown yet: nothing to send
    with pytest.raises(gr.Error, match="Unknown component"):
        embeddings_views.heatmap_value(None, "nope")


def test_evenly_spaced_keeps_first_and_last() -> None:
    choices = [ModelChoice(f"checkpoint:r/step-{i}", f"r · step {i}", "checkpoint", i) for i in range(10)]
    picked = embeddings_views.evenly_spaced(choices)
    assert len(picked) == 6 and picked[0].step == 0 and picked[-1].step == 9
    assert [c.step for c in picked] == sorted({c.step for c in picked})
    assert embeddings_views.evenly_spaced(choices[:3]) == choices[:3]


def test_over_training_needs_two_checkpoints(tiny_tokenizer) -> None:
    message, figure = embeddings_views.over_training(_services(tiny_tokenizer, None), "default", 16)
    assert "at least 2 checkpoints" in message and "found 0" in message
    assert isinstance(figure, go.Figure) and not figure.data


def test_over_training_direct(services: Services) -> None:
    message, figure = embeddings_views.over_training(services, f"checkpoint:{RUN}/{checkpoint_name(6)}", 12)
    assert f"Run **{RUN}**" in message and "| step 3 |" in message and "| step 9 |" in message
    assert len(figure.data) == 3 and all(len(trace.z) == 12 for trace in figure.data)
    with pytest.raises(gr.Error, match="whole number"):
        embeddings_views.over_training(services, "default", 1)


def test_layer_slider_follows_the_model(services: Services) -> None:
    update = embeddings_tab.layer_slider_update(services, "default", 5)
    assert update["maximum"] == 2 and update["value"] == 2
    assert embeddings_tab.layer_slider_update(services, "default", 1)["value"] == 1
    assert embeddings_tab.layer_slider_update(services, "checkpoint:nope/step-1", 1) is not None   # skipped quietly


# --- through the server ------------------------------------------------------------------

def _embed(client: Client, text: str, pair: str = "", layer: Any = 2, component: str = "output",
           token: str = "all", model: str = "default") -> tuple[Any, ...]:
    return tuple(client.predict(model, text, pair, layer, component, token, api_name="/embeddings"))


def test_api_names(client: Client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert {"/embeddings", "/embeddings_over_training"} <= set(endpoints)
    assert not any(name.startswith("/embeddings_example") for name in endpoints)
    params = [p["parameter_name"] for p in endpoints["/embeddings"]["parameters"]]
    assert params == ["model_key", "text", "text_pair", "layer", "component", "token"]


def test_embeddings_through_the_client(client: Client, services: Services) -> None:
    out = _embed(client, *PAIR, layer=1, token="3")
    summary, norms, heatmap, pos_sim, pos_pca, ctx_pca, seg, table, token = out
    assert "**12 tokens**" in summary and "layer 1 of 2" in summary
    for plot in (norms, pos_pca, ctx_pca, seg):
        assert plot["type"] == "plotly"
    assert heatmap["kind"] == "dimensions" and pos_sim["kind"] == "similarity"      # canvas views' values (dicts)
    engine = embeddings(services.model("default"), *PAIR)                       # the arrays survive the JSON
    for name in COMPONENTS:
        entry = heatmap["maps"][name]
        assert np.abs(embeddings_canvas.decoded(entry) - engine.component(name)).max() <= \
            embeddings_canvas.map_precision(entry)
    assert table["headers"] == embeddings_plots.NEIGHBOUR_COLUMNS
    assert {row[0] for row in table["data"]} == {3} and len(table["data"]) == 8
    assert token["value"] == "3" and ["3: sat", "3"] in token["choices"]   # the dropdown update


@pytest.mark.parametrize("kwargs, message", [
    (dict(text=""), "Type some text"),
    (dict(text="the cat", layer=-7), "less than minimum value 0"),
    (dict(text="the cat", layer=49), "greater than maximum"),
    (dict(text="the cat", token="cat"), "neither 'all' nor a token position"),
    (dict(text="the cat", model="checkpoint:nope/step-000001"), "does not exist.*Models available now"),
])
def test_bad_input_is_a_clear_error_and_the_app_keeps_serving(client: Client, kwargs: dict, message: str) -> None:
    with pytest.raises(AppError, match=message):
        _embed(client, **kwargs)
    assert "**4 tokens**" in _embed(client, "the cat")[0]


def test_over_training_through_the_client(client: Client) -> None:
    message, plot = client.predict("default", 16, api_name="/embeddings_over_training")
    assert f"Run **{RUN}**" in message and "(3 checkpoints, steps 3–9): showing 3" in message
    assert plot["type"] == "plotly" and "step 9" in plot["plot"]
