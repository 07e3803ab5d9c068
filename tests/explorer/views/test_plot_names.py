"""explorer/views/plot_names.py and plot_export.py: a Plotly chart's exports are named after the model, the input
and the view. The figure a handler returns carries ``layout.meta = {"export", "view"}`` and Gradio sends it to the
page unchanged (the page's script reads it there); a figure's own meta (Fill-mask's probability scales) stays; a
chart with no model or input still gets a view name; the page script defines the shared names before the charts'
control."""
from __future__ import annotations

import json

import gradio as gr
import plotly.graph_objects as go

from explorer.fill_mask import plots as fill_mask_plots
from explorer.fill_mask.tab import fill
from explorer.tokenize.tab import tokenize
from explorer.views import plot_export
from explorer.views.export_names import export_info
from explorer.views.plot_names import VIEW_CHARS, named, named_for
from support.probing_helpers import make_services


def sent(fig: go.Figure) -> dict:
    """The layout as the page gets it: what ``gr.Plot`` sends for ``fig``."""
    return json.loads(gr.Plot().postprocess(fig).plot)["layout"]


def test_the_page_gets_the_model_the_input_and_the_view() -> None:
    fig = named(go.Figure(go.Bar(x=["a"], y=[1])), export_info("default", "The cat sat on the mat."), "Top-k per mask")
    meta = sent(fig)["meta"]
    assert meta == {"view": "Top-k per mask", "export": {"model": "default", "input": "The cat sat on the mat.",
                                                         "stem": "bert-explorer_default_the-cat-sat-on-the-mat"}}


def test_a_chart_without_model_or_input_names_the_view_and_else_its_title() -> None:
    fig = named_for(go.Figure(layout=dict(title=dict(text="Loss<br>over steps"))), None, "  ", None)
    assert sent(fig)["meta"] == {"view": "Loss over steps"}                     # the title, its tags as spaces
    assert named(go.Figure(), None, "x" * 500).layout.meta["view"] == "x" * VIEW_CHARS
    assert "view" not in (named(go.Figure(), None).layout.meta or {})          # no view, no title: no name


def test_what_is_not_a_figure_passes_as_it_is() -> None:
    skip = gr.skip()
    assert named(skip, export_info("default", "x"), "v") is skip          # a live tick's "nothing changed"
    assert named(None, None, "v") is None


def test_renaming_keeps_the_figures_own_meta_and_fill_mask_zoom_still_works() -> None:
    fig = fill_mask_plots.predictions_figure(tokens=[["a", "b"], ["c", "d"]], scores=[[0.5, 0.1], [0.05, 0.01]],
                                             token_ids=[[1, 2], [3, 4]], titles=["[MASK] 1", "[MASK] 2"])
    named(fig, export_info("default", "A [MASK] and a [MASK]."), "Top-k per mask")
    named(fig, export_info("other", "B"), "Top-k per mask")                    # a second stamp replaces the first
    meta = sent(fig)["meta"]
    assert meta["export"]["model"] == "other" and fill_mask_plots.SCALES in meta
    zoomed = fill_mask_plots.zoom_figure(go.Figure(fig), True)
    assert zoomed.layout.meta["export"]["model"] == "other"                  # the zoomed chart keeps its names


def test_the_tabs_charts_carry_their_names(tiny_tokenizer) -> None:
    services = make_services(tiny_tokenizer)
    strip = tokenize(services, "default", "the cat sat", "a dog", 32)[3]
    assert strip.layout.meta["view"] == "Segments and positions"
    assert strip.layout.meta["export"] == export_info("tiny test model", "the cat sat", "a dog")
    bundled = tokenize(services, None, "the cat sat", "", 32)[3]              # no model picked: the bundled tokenizer
    assert bundled.layout.meta["export"]["stem"].startswith("bert-explorer_bundled-tokenizer_the-cat-sat")
    chart = fill(services, "default", "the cat [MASK] .", 3, "")[0]
    assert chart.layout.meta["view"] == "Top-k per mask"
    assert chart.layout.meta["export"]["stem"] == "bert-explorer_tiny-test-model_the-cat-mask"


def test_the_page_script_defines_the_shared_names_before_the_charts_control() -> None:
    script = plot_export.script()
    assert script.startswith("() => {") and script.rstrip().endswith("return [];\n}")
    assert script.index("window.BertCanvas = {") < script.index("window.BertPlotExport = {")
    assert "MutationObserver" in script and "setInterval" not in script          # no polling loop
    assert "http://" not in script.replace("http://www.w3.org", "") and "https://" not in script
