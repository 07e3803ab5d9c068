"""*Download as HTML* (``explorer.views.html_download``): the file is named after the view, the model and the input
with nothing a file system or a browser would trip on; a click before any answer gets a warning sentence and no
file; old downloads' folders are cleaned up."""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import gradio as gr
import pytest

from explorer.views import html_download


@pytest.mark.parametrize("view, key, text, expected", [
    ("attention", "default", "The cat sat on the mat.", "attention-default-The-cat-sat-on-the-mat.html"),
    ("embeddings", "checkpoint:run-a/step-000300", "Who was Jim Henson?",
     "embeddings-checkpoint-run-a-step-000300-Who-was-Jim-Henson.html"),
    ("neuron-view", "local:models/../../etc", "../../etc/passwd <script>", "neuron-view-local-models-etc-etc-passwd-script.html"),
    ("attention", None, "   ", "attention-default-untitled.html"),
    ("attention", "hub:owner/name", "日本語だけ", "attention-hub-owner-name-untitled.html"),
])
def test_the_file_names_the_view_the_model_and_the_input_safely(view, key, text, expected) -> None:
    assert html_download.file_name(view, key, text) == expected


def test_a_long_input_is_cut_in_the_name_and_the_title() -> None:
    name = html_download.file_name("attention", "default", "word " * 50)
    assert len(name) <= len("attention-default-.html") + html_download.NAME_PART
    title = html_download.title("attention", "default", "word " * 50, "pair")
    assert title.startswith("attention · default · “word word") and title.endswith("…”") and len(title) < 120


def test_a_click_before_any_answer_warns_and_gives_no_file() -> None:
    made = []
    download = html_download.handler("attention", "press Show attention", lambda *a, **k: made.append(a), 3)
    with pytest.warns(UserWarning, match="Nothing to download yet: press Show attention first"):
        answer = download("default", "some text", "", 1, 0, None, None, None)
    assert made == [] and isinstance(answer, type(gr.skip()))


def test_an_answer_becomes_a_file_in_a_fresh_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = {}

    def make(layer, value, title):
        seen.update(layer=layer, value=value, title=title)
        return "<!DOCTYPE html><html></html>"

    download = html_download.handler("attention", "press Show attention", make, 1)
    first = Path(download("default", "The cat.", "It sat.", 2, {"kind": "maps"}))
    second = Path(download("default", "The cat.", "It sat.", 2, {"kind": "maps"}))
    assert first.name == second.name == "attention-default-The-cat.html" and first.parent != second.parent
    assert first.read_text(encoding="utf-8") == "<!DOCTYPE html><html></html>"
    assert first.parent.parent == tmp_path / html_download.FOLDER
    assert seen == {"layer": 2, "value": {"kind": "maps"}, "title": "attention · default · “The cat. | It sat.”"}


def test_old_download_folders_go_when_a_new_one_is_made(tmp_path: Path) -> None:
    old = tmp_path / f"{html_download.PREFIX}old"
    old.mkdir()
    (old / "x.html").write_text("x")
    hour_ago = time.time() - 2 * html_download.MAX_AGE_S
    os.utime(old, (hour_ago, hour_ago))
    other = tmp_path / "attention-export-keep"              # another feature's folder stays
    other.mkdir()
    os.utime(other, (hour_ago, hour_ago))
    fresh = html_download.fresh_folder(tmp_path)
    assert fresh.is_dir() and not old.exists() and other.exists()
