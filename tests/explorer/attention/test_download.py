"""The Attention tab's *Download as HTML* buttons (``explorer.attention.download``) as the tab wires them: each
event takes the model, the text, the sliders and the views' values the page holds, and answers with the
standalone file of that answer (no model run), or a warning before any answer."""
from __future__ import annotations

import html
import os
import tempfile
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402

from explorer.attention import tab as attention_tab  # noqa: E402
from explorer.attention.neuron_tab import show_neuron_canvas  # noqa: E402
from explorer.attention.views import attention_views  # noqa: E402
from support.probing_helpers import make_services, tab_app  # noqa: E402

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def built(tiny_tokenizer):
    services = make_services(tiny_tokenizer)
    demo, widgets = tab_app(services, attention_tab.build)
    return services, demo, widgets


def event(demo: gr.Blocks, api_name: str):
    return next(fn for fn in demo.fns.values() if fn.api_name == api_name)


def test_the_buttons_send_the_views_the_page_holds(built) -> None:
    _, demo, w = built
    views, neuron = event(demo, "attention_html"), event(demo, "neuron_view_html")
    assert views.api_visibility == neuron.api_visibility == "private"
    assert views.inputs[1:] == [w["text"], w["pair"], w["layer"], w["head"], w["heatmap"], w["head_view"],
                                w["model_view"]]
    assert neuron.inputs[-1] is w["neuron"]["view"] and views.outputs == neuron.outputs
    assert isinstance(views.outputs[0], gr.File)


def test_a_click_after_an_answer_gives_its_file(built, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    services, demo, _ = built
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    heatmap, head_view, model_view, *_ = attention_views(services, "default", TEXT, "", 2, 1, 64, [0, 1], "entropy")
    path = Path(event(demo, "attention_html").fn("default", TEXT, "", 1, 3, heatmap, head_view, model_view))
    assert path.name == "attention-default-the-cat-sat-on-the-mat.html"
    text = html.unescape(path.read_text(encoding="utf-8"))
    assert "<title>attention · default · “the cat sat on the mat”</title>" in text
    assert '<option value="1" selected>1</option>' in text and '<option value="3" selected>3</option>' in text
    value = show_neuron_canvas(services, "default", TEXT, "", 2, 1, 64, 2)
    neuron = Path(event(demo, "neuron_view_html").fn("default", TEXT, "", 2, 1, value))
    assert neuron.name == "neuron-view-default-the-cat-sat-on-the-mat.html"
    assert 'class="neuron-view"' in neuron.read_text(encoding="utf-8")


def test_a_click_before_any_answer_warns(built) -> None:
    _, demo, _ = built
    with pytest.warns(UserWarning, match="press Show attention first"):
        answer = event(demo, "attention_html").fn("default", TEXT, "", 1, 0, None, None, None)
    assert isinstance(answer, type(gr.skip()))
    with pytest.warns(UserWarning, match="press Show the neuron view first"):
        event(demo, "neuron_view_html").fn("default", TEXT, "", 1, 0, None)
