"""The Attention tab: its handlers directly, then every api_name through an in-process server."""
from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from support.app_helpers import serve  # noqa: E402
from conftest import tiny_config  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from engine.probes.attention.maps import attention, encode_input  # noqa: E402
from engine.probes.inference import ablate_heads  # noqa: E402
from explorer.models.choices import ModelChoice  # noqa: E402
from explorer.models.registry import ModelRegistry  # noqa: E402
from engine.training.runs.state import write_checkpoint  # noqa: E402
from engine.training.runs.run_folder import CHECKPOINTS_DIR, checkpoint_name
from explorer.views import browser_arrays as browser_arrays  # noqa: E402
from explorer.models import picker as model_picker  # noqa: E402
from explorer.attention import actions as attention_actions  # noqa: E402
from explorer.attention import tab as attention_tab  # noqa: E402
from explorer.attention import views as attention_views  # noqa: E402
from explorer.attention import sections as attention_sections  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.reference import randomize_  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the cat sat on the mat"
PAIR = "the dog ran"
STEPS = (2, 4, 6, 8)
API = ("/attention", "/ablate_heads", "/attention_export", "/attention_over_training")


def _model(seed: int, heads: tuple[str, ...] = ("mlm", "nsp", "qa")) -> BertWithHeads:
    return randomize_(BertWithHeads(tiny_config(), heads=heads), seed, scale=0.3).eval()


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> Services:
    """``default`` (MLM+NSP+QA), ``encoder`` (no heads), and a run with four checkpoints."""
    runs = tmp_path_factory.mktemp("runs")
    for i, step in enumerate(STEPS):
        write_checkpoint(_model(100 + i), tiny_tokenizer, runs / "run-a" / CHECKPOINTS_DIR / checkpoint_name(step),
                         state={"step": step}, info={"step": step, "created": time.time() + i})
    registry = ModelRegistry(runs_root=runs, default_dir=None)
    full, bare = _model(0), _model(1, heads=())
    registry.pin("default", LoadedModel(full, tiny_tokenizer, full.config, "tiny test model"))
    registry.pin("encoder", LoadedModel(bare, tiny_tokenizer, bare.config, "tiny encoder"))
    return Services(tokenizer=tiny_tokenizer, models=registry)


@pytest.fixture(scope="module")
def empty_services(tiny_tokenizer) -> Services:
    registry = ModelRegistry(default_dir=None)
    model = _model(0)
    registry.pin("default", LoadedModel(model, tiny_tokenizer, model.config, "tiny test model"))
    return Services(tokenizer=tiny_tokenizer, models=registry)


# --- handlers ----------------------------------------------------------------------------

def test_show_attention_outputs(services: Services) -> None:
    heat, head_view, model_view, stats_plot, table, summary = attention_views.show_attention(
        services, "default", TEXT, PAIR, 2, 3, 128, [0, 2], "sep")
    assert all(isinstance(f, go.Figure) for f in (heat, head_view, model_view, stats_plot))
    assert list(heat.layout.xaxis.ticktext) == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]",
                                                "the", "dog", "ran", "[SEP]"]
    assert {s.name for s in head_view.layout.shapes if s.showlegend} == {"head 0", "head 2"}   # the heads asked for
    assert len(model_view.data) == 1 and "share to [SEP]" in stats_plot.layout.title.text
    assert isinstance(table, pd.DataFrame) and list(table.columns) == attention_sections.TABLE_COLUMNS and len(table) == 8
    assert "**12 tokens**" in summary and "Layer 2, head 3" in summary and "Layer 2, head 3" in heat.layout.title.text
    assert "Layer 2:" in head_view.layout.legend.title.text


def _first_layer(loaded: LoadedModel) -> np.ndarray:
    """The model's own attentions[0] for TEXT: (nh, S, S) of its first encoder layer."""
    encoding = encode_input(loaded, TEXT, None)
    with torch.no_grad():
        out = loaded.model(torch.tensor([encoding.input_ids]), token_type_ids=torch.tensor([encoding.token_type_ids]),
                           output_attentions=True)
    return out.encoder.attentions[0][0].numpy()


def test_layer_1_in_the_ui_is_the_engines_first_attention_layer(services: Services) -> None:
    """The tab numbers layers from 1 (0 is the embeddings' output): its layer 1 shows the engine's
    attentions[0], the model's first encoder layer, and the heads table and figures number them 1 and 2."""
    heat, _, model_view, stats_plot, table, summary = attention_views.show_attention(
        services, "default", TEXT, "", 1, 2, 128, None, "entropy")
    loaded = services.model("default")
    first = _first_layer(loaded)[2]                                                  # (S, S) of layer 1, head 2
    np.testing.assert_allclose(np.asarray(heat.data[0].z), first, atol=1e-6)
    assert "Layer 1, head 2" in heat.layout.title.text and "Layer 1, head 2" in summary
    assert list(table["layer"]) == [1] * 4 + [2] * 4 and list(table["head"]) == [0, 1, 2, 3] * 2
    assert list(stats_plot.data[0].y) == [1, 2] and list(stats_plot.layout.yaxis.tickvals) == [1, 2]
    (frame,) = stats_plot.layout.shapes
    assert (frame.y0, frame.y1) == (0.5, 1.5)                                          # around layer 1
    assert [a.text for a in model_view.layout.annotations if a.text.startswith("L")] == ["L1", "L2"]
    with pytest.raises(ValueError, match="layer 0 is the embeddings' output"):
        attention_views.show_attention(services, "default", TEXT, "", 0, 0)


def test_the_statistics_table_reads_in_full(services: Services) -> None:
    """Short headers, each with a column wide enough, and the shares as percentages."""
    table = attention_views.show_attention(services, "default", TEXT, "", 1, 0)[4]
    assert len(attention_sections.TABLE_WIDTHS) == len(attention_sections.TABLE_COLUMNS)
    for header, width in zip(attention_sections.TABLE_COLUMNS, attention_sections.TABLE_WIDTHS):
        assert int(width.removesuffix("px")) >= 8 * len(header) + 20, header               # ~8 px a letter + padding
    total = sum(int(width.removesuffix("px")) for width in attention_sections.TABLE_WIDTHS)
    assert total <= attention_sections.TABLE_MIN_WIDTH                              # the column holds every column
    assert all(str(v).endswith("%") for v in table["[CLS]"]) and "distance" in table.columns


@pytest.mark.parametrize("args, message", [
    (("default", "", "", 0, 0), "Type a sentence"),
    (("default", TEXT, "", 3, 0), "layer 3 does not exist: this model has 2 layers, numbered 1 to 2"),
    (("default", TEXT, "", 0, 0), "layer 0 is the embeddings' output"),
    (("default", TEXT, "", 1, 9), "head 9 does not exist"),
    (("default", TEXT, "", 1, 0, 4), "Max length must be a whole number from 8 to"),
    (("default", TEXT, "", 1, 0, 128, [7]), r"heads \[7\] do not exist"),
    (("default", TEXT, "", 1, 0, 128, ["x"]), "must be numbers from 0 to 3"),
    (("default", TEXT, "", 1, 0, 128, None, "bogus"), "unknown statistic"),
])
def test_show_attention_bad_input(services: Services, args: tuple, message: str) -> None:
    with pytest.raises((ValueError, gr.Error), match=message):
        attention_views.show_attention(services, *args)


def test_ablation_handler(services: Services) -> None:
    fig, summary = attention_actions.run_ablation(services, "default", "the cat [MASK] on the mat", PAIR, "1:1, 2:*")
    assert "Removed **5 head(s)**: 1:1, 2:0, 2:1, 2:2, 2:3 (layer:head)" in summary and "P(IsNext)" in summary
    assert "pseudo-log-likelihood" in summary and isinstance(fig, go.Figure)
    assert 'data-gloss="gloss-nats"' in summary and " nats** (" in summary             # the loss change in nats
    assert re.search(r"P\(IsNext\): \*\*[0-9.]+% → [0-9.]+%\*\*", summary)          # a probability: a percentage
    assert len(fig.layout.annotations) == 3                          # loss, the [MASK]'s fillers, IsNext
    for heads, message in (("", "Name the heads"), ("1:9", "head 9 does not exist"), ("x", "is not layer:head"),
                           ("0:1", "layer 0 is the embeddings' output"), ("3:*", "layer 3 does not exist")):
        with pytest.raises((ValueError, gr.Error), match=message):
            attention_actions.run_ablation(services, "default", TEXT, "", heads)
    with pytest.raises(ValueError, match="only attention maps are available"):
        attention_actions.run_ablation(services, "encoder", TEXT, "", "1:0")
    with pytest.raises(gr.Error, match="Top-k must be a whole number from 1 to 20, got 0"):
        attention_actions.run_ablation(services, "default", TEXT, "", "1:0", 0)


def test_ablating_layer_1_removes_the_engines_first_layer(services: Services) -> None:
    """"1:2" in the UI is the engine's (0, 2): the same result as the engine's own call with that mask."""
    loaded = services.model("default")
    mask = [[1.0] * 4, [1.0] * 4]
    mask[0][2] = 0.0
    expected = ablate_heads(loaded, TEXT, None, mask, top_k=5)
    _, summary = attention_actions.run_ablation(services, "default", TEXT, "", "1:2")
    assert expected.masked_heads == [(0, 2)] and "Removed **1 head(s)**: 1:2 (layer:head)" in summary
    assert f"**{expected.baseline.pll_loss:.3f} → {expected.ablated.pll_loss:.3f} nats**" in summary


def test_export_handler(services: Services) -> None:
    paths = [Path(p) for p in attention_actions.export_files(services, "default", TEXT, "", 2, 2)]
    assert [p.suffix for p in paths] == [".png", ".svg", ".json"] and all(p.name.startswith("attention-L2-H2")
                                                                         for p in paths)
    data = json.loads(paths[2].read_text(encoding="utf-8"))
    assert data["layer"] == 2 and data["head"] == 2 and data["tokens"][0] == "[CLS]" and "entropy" in data["stats"]
    assert len(data["attention"]) == len(data["tokens"]) and "layer 0 is the embeddings" in data["layer_numbering"]
    second = attention(services.model("default"), TEXT).attentions[1, 2]             # the engine's index 1
    np.testing.assert_allclose(np.asarray(data["attention"]), second, atol=1e-5)
    assert "Layer 2, head 2" in paths[1].read_text(encoding="utf-8")
    ET.fromstring(paths[1].read_text(encoding="utf-8"))


def test_over_training_handler(services: Services, empty_services: Services) -> None:
    maps, lines, note = attention_actions.over_training(services, "default", TEXT, "", 2, 0)
    assert len(maps.data) == len(STEPS) and [a.text for a in maps.layout.annotations][:4] == [f"step {s}" for s in STEPS]
    assert list(lines.data[0].x) == list(STEPS) and "Run **run-a** (4 checkpoints, steps 2–8): showing 4" in note
    assert note.endswith("; layer 2, head 0.") and maps.layout.title.text.startswith("Layer 2, head 0")
    assert lines.layout.title.text.startswith("Layer 2, head 0")
    _, _, named = attention_actions.over_training(services, "default", TEXT, "", 2, 0, run="run-a")
    assert named == note
    with pytest.raises(ValueError, match="The run 'run-z' has no checkpoints. Runs with checkpoints now: run-a"):
        attention_actions.over_training(services, "default", TEXT, "", 1, 0, run="run-z")
    with pytest.raises(gr.Error, match="no training checkpoints yet"):
        attention_actions.over_training(empty_services, "default", TEXT, "", 1, 0)
    with pytest.raises(ValueError, match="layer 3 does not exist"):
        attention_actions.over_training(services, "default", TEXT, "", 3, 0)
    with pytest.raises(ValueError, match="layer 0 is the embeddings' output"):
        attention_actions.over_training(services, "default", TEXT, "", 0, 0)


def test_pick_evenly_and_slider_updates(services: Services) -> None:
    choices = [ModelChoice(f"k{i}", f"l{i}", "checkpoint", i) for i in range(10)]
    picked = attention_actions.pick_evenly(choices, 4)
    assert [c.step for c in picked] == [0, 3, 6, 9]
    assert attention_actions.pick_evenly(choices[:3], 6) == choices[:3]
    layer, head, heads = attention_tab.slider_updates(services, "default", 5, 1, [0, 3, 11])
    assert (layer["minimum"], layer["maximum"], layer["value"]) == (1, 2, 2) and head["maximum"] == 3
    assert head["value"] == 1 and attention_tab.slider_updates(services, "default", 0, 0, [])[0]["value"] == 1
    assert heads["value"] == [0, 3] and len(heads["choices"]) == 4
    skipped = attention_tab.slider_updates(services, "checkpoint:nope/step-000001", 0, 0, [])
    assert all(s == gr.skip() for s in skipped)


def test_png_name_config() -> None:
    data = attention_views.with_png_name(go.Figure(), "attention-L1-H2 x")
    payload = json.loads(data.plot)
    assert payload["config"]["toImageButtonOptions"] == {"format": "png", "filename": "attention-L1-H2_x", "scale": 2}
    assert "data" in payload and "layout" in payload


# --- through the server ------------------------------------------------------------------

@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[Client]:
    with gr.Blocks(analytics_enabled=False) as demo:
        picker = model_picker.build(services)
        with gr.Tabs():
            with gr.Tab("Attention"):
                widgets = attention_tab.build(services, picker)
    # wide at build time (API callers may pick deeper models); a browser narrows them on load
    assert widgets["layer"].maximum == attention_sections.MAX_LAYERS and widgets["head"].maximum == attention_sections.MAX_HEADS - 1
    assert (widgets["layer"].minimum, widgets["layer"].value, widgets["layer"].label) == (1, 1, "Layer (from 1)")
    assert (widgets["head"].minimum, widgets["head"].label) == (0, "Head (from 0)")
    assert widgets["view_heads"].value == [0, 1, 2, 3]
    with serve(demo) as running:
        yield running


def _attention(client: Client, *, text: str = TEXT, pair: str = "", layer: int = 1, head: int = 0,
               heads: list[int] | None = None, statistic: str = "entropy", model: str = "default") -> tuple[Any, ...]:
    return tuple(client.predict(model, text, pair, layer, head, 128, [0, 1, 2, 3] if heads is None else heads,
                                statistic, api_name="/attention"))


def test_api_names(client: Client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert set(API) <= set(endpoints)
    assert not any(name.startswith("/attention_") and name not in API for name in endpoints)  # helpers stay private


def test_attention_endpoint(client: Client, services: Services) -> None:
    """The canvas views' values, decoded as the browser decodes them, are the engine's maps to the uint8
    encoding's precision; the model view's grid is the engine's maps pooled; the statistics are a Plotly figure."""
    heat, head_view, model_view, stats_plot, table, summary = _attention(client, pair=PAIR, layer=1, head=2)
    expected = attention(services.model("default"), TEXT, PAIR, 64)             # the tab caps 128 at the model's 64
    assert heat["tokens"][:3] == ["[CLS]", "the", "cat"] and (heat["layer"], heat["head"]) == (0, 2)
    assert heat["map_layers"] == [0, 1] and heat["map_heads"] == [0, 1, 2, 3]   # a short input: every map at once
    maps = browser_arrays.decode(heat["maps"])
    assert np.abs(maps - expected.attentions).max() <= browser_arrays.precision(heat["maps"])
    assert head_view["id"] == heat["id"] == model_view["id"] and head_view["heads"] == [0, 1, 2, 3]
    grid = browser_arrays.decode(model_view["grid"])
    assert model_view["block"] == 1 and np.abs(grid - expected.attentions).max() <= 1 / 510 + 1e-6
    stats = browser_arrays.decode(heat["stats"])                                 # (L, nh, statistics)
    np.testing.assert_allclose(stats[..., heat["stat_names"].index("entropy")], expected.stats.entropy, rtol=2e-3)
    assert stats_plot["type"] == "plotly"
    assert json.loads(stats_plot["plot"])["config"]["toImageButtonOptions"]["filename"] == "head-statistics-entropy"
    assert table["headers"] == attention_sections.TABLE_COLUMNS and len(table["data"]) == 8
    assert "Layer 1, head 2" in summary


def test_other_endpoints(client: Client) -> None:
    figure, summary = client.predict("default", "the cat [MASK] on the mat", "", "1:2", 5, api_name="/ablate_heads")
    assert figure["type"] == "plotly" and "Removed **1 head(s)**: 1:2" in summary
    files = client.predict("default", TEXT, "", 1, 3, 128, api_name="/attention_export")
    paths = {Path(f).suffix: Path(f) for f in files}
    assert sorted(paths) == [".json", ".png", ".svg"]
    assert json.loads(paths[".json"].read_text(encoding="utf-8"))["head"] == 3
    assert paths[".png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ET.fromstring(paths[".svg"].read_text(encoding="utf-8"))
    note, maps, lines = client.predict("default", TEXT, "", 1, 1, 128, api_name="/attention_over_training")
    assert "(4 checkpoints, steps 2–8): showing 4" in note and maps["type"] == "plotly" and lines["type"] == "plotly"


BAD_CALLS = [
    (dict(layer=5), "layer 5 does not exist: this model has 2 layers, numbered 1 to 2"),
    (dict(layer=49), "greater than maximum"),
    (dict(layer=0), "less than minimum"),
    (dict(heads=[4]), r"heads \[4\] do not exist"),
    (dict(text="   "), "Type a sentence"),
    (dict(model="checkpoint:nope/step-000001"), "does not exist.*Models available now"),
]


def test_bad_inputs_keep_serving(client: Client) -> None:
    for call, message in BAD_CALLS:
        with pytest.raises(AppError, match=message):
            _attention(client, **call)
    assert "Layer 1, head 0" in _attention(client)[-1]                 # still serving


def test_ablation_without_an_mlm_head_is_explained(client: Client) -> None:
    with pytest.raises(AppError, match="only attention maps are available"):
        client.predict("encoder", TEXT, "", "1:0", 5, api_name="/ablate_heads")
    assert "Layer 1, head 0" in _attention(client, model="encoder")[-1]


def test_the_api_documents_the_numbering(client: Client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    layer = next(p for p in endpoints["/attention"]["parameters"] if p["parameter_name"] == "layer")
    assert layer["parameter_default"] == 1 and "from 1" in str(endpoints["/attention"])
    assert "0-based" not in str({name: endpoints[name] for name in API})
