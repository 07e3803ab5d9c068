"""The Embeddings tab's *Download as HTML* button (``explorer.embeddings.download``) as the tab wires it: the
event takes the model, the text, the component radio and the two maps the page holds, and answers with the
standalone file of that answer (no model run), or a warning before any answer."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402

from explorer.embeddings import tab as embeddings_tab  # noqa: E402
from explorer.embeddings.views import show_embeddings  # noqa: E402
from support.probing_helpers import make_services, tab_app  # noqa: E402

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def built(tiny_tokenizer):
    services = make_services(tiny_tokenizer)
    demo, widgets = tab_app(services, embeddings_tab.build)
    return services, demo, widgets


def event(demo: gr.Blocks):
    return next(fn for fn in demo.fns.values() if fn.api_name == "embeddings_html")


def test_the_button_sends_the_maps_the_page_holds(built) -> None:
    _, demo, w = built
    fn = event(demo)
    assert fn.api_visibility == "private" and isinstance(fn.outputs[0], gr.File)
    assert fn.inputs[1:] == [w["text"], w["pair"], w["component"], w["heatmap"], w["position_similarity"]]


def test_a_click_after_an_answer_gives_its_file(built, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    services, demo, _ = built
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _, _, dimensions, similarity, *_ = show_embeddings(services, "default", TEXT, "the dog ran", 1, "output", "all")
    path = Path(event(demo).fn("default", TEXT, "the dog ran", "segment", dimensions, similarity))
    assert path.name == "embeddings-default-the-cat-sat-on-the-mat.html"
    text = path.read_text(encoding="utf-8")
    assert '<option value="segment" selected>' in text and 'class="emb-view emb-similarity"' in text


def test_a_click_before_any_answer_warns(built) -> None:
    _, demo, _ = built
    with pytest.warns(UserWarning, match="press Show embeddings first"):
        answer = event(demo).fn("default", TEXT, "", "output", None, None)
    assert isinstance(answer, type(gr.skip()))
