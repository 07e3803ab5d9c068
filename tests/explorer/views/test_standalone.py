"""The standalone HTML document (``explorer.views.standalone``): it holds the scripts as ``assets/`` has them, the
views' CSS, every value as JSON that reads back the same, and no external URL; a token such as ``</script>``
cannot end a script early; the selects write what the views' scripts read. Drawing it in chromium, offline, is
tests/e2e/test_standalone_html.py."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from explorer.views import standalone
from explorer.views.standalone import Control, Panel, standalone_html

ASSETS = Path(__file__).resolve().parents[3] / "assets"
URL = re.compile(r"https?://[^\s\"'<>)]*", re.IGNORECASE)
NASTY = "</script><script>alert(1)</script><!-- & -->"
VALUE = {"kind": "maps", "id": "abc", "tokens": ["[CLS]", NASTY, "é", "[SEP]"], "layer": 0}


def document(value: dict | None = None, **options) -> str:
    panel = Panel("Heatmap <of> the head", '<div class="attn-view"><canvas></canvas></div>', value or VALUE,
                  "window.BertAttentionViews.mount('heatmap', element, props, trigger, watch);")
    controls = [Control("attention-layer", "Layer", [("1", "1"), ("2", "2")], "2"),
                Control("embeddings-component", "Component", [("word", "word"), ("output", "output")], "word",
                        mirror="radio")]
    return standalone_html(options.pop("title", "attention · default · “a </title> test”"), [panel],
                           [ASSETS / "attention_view.js"], controls, ["Holds layers 1–2."])


def values_in(text: str) -> list:
    return json.loads(re.search(r'<script type="application/json" id="sa-values">(.*?)</script>', text, re.S).group(1))


def test_the_document_inlines_the_scripts_as_the_assets_hold_them() -> None:
    text = document()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    for name in ("browser_arrays.js", "canvas_tools.js", "attention_view.js"):
        source = standalone.inline_script((ASSETS / name).read_text(encoding="utf-8"))
        assert source in text, name                          # read now: what assets/ holds at this moment
    order = [text.index("window.BertArrays ="), text.index("window.BertCanvas ="),
             text.index("window.BertAttentionViews ="), text.index("window.BertStandalone ="),
             text.index("mounts.forEach")]
    assert order == sorted(order)                            # decoder, tools, the view, its mount, the host
    assert "window.BertAttentionViews.mount('heatmap', element, props, trigger, watch);" in text


def test_the_document_holds_the_value_and_the_views_css_and_no_external_url() -> None:
    text = document()
    assert values_in(text) == [VALUE]                        # the same dict, once parsed
    assert ".attn-tip.shown { display: block; }" in text and ".neuron-tip" in text and ".emb-tip" in text
    assert "--body-text-color:" in text and "color-scheme: light" in text
    assert ".curves-tip" not in text and ".wordpieces" not in text      # only the canvas views' rules
    assert not [u for u in URL.findall(text) if not u.startswith("http://www.w3.org/")]
    assert not re.search(r"<(script|img|iframe|link|source)\b[^>]*\s(src|href)=", text, re.IGNORECASE)
    style = text[text.index("<style>"):text.index("</style>")]
    assert "@import" not in style and "url(" not in style


def test_a_token_cannot_end_the_script_or_open_a_comment() -> None:
    text = document()
    assert text.count("</script>") == text.count("<script")  # every script ends where it should
    assert NASTY not in text and "<!--" not in text
    assert "<title>attention · default · “a &lt;/title&gt; test”</title>" in text
    assert "<h2>Heatmap &lt;of&gt; the head</h2>" in text
    encoded = standalone.json_for_script({"t": NASTY})
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded and json.loads(encoded) == {"t": NASTY}
    assert standalone.inline_script('x = "</SCRIPT>";') == 'x = "<\\/SCRIPT>";'


def test_the_selects_write_the_inputs_the_views_read() -> None:
    text = document()
    layer = re.search(r'<label class="sa-control" id="attention-layer" data-mirror="number">(.*?)</label>', text).group(1)
    assert '<option value="2" selected>2</option>' in layer and '<input type="number" hidden value="2">' in layer
    radios = re.search(r'id="embeddings-component" data-mirror="radio">(.*?)</label>', text).group(1)
    assert '<input type="radio" hidden name="embeddings-component" value="word" checked>' in radios
    assert 'value="output">' in radios and "Holds layers 1–2." in text


def test_a_control_refuses_a_value_it_does_not_offer_and_a_document_needs_a_view() -> None:
    with pytest.raises(ValueError, match="'7' is not one of its options"):
        Control("attention-layer", "Layer", [("1", "1")], "7").markup()
    with pytest.raises(ValueError, match="at least one view"):
        standalone_html("t", [], [])


def test_view_css_keeps_every_marked_block_of_the_views_and_only_those() -> None:
    css = """a { color: red; }
/* --- Attention canvas views (x) --- */
.attn-view { position: relative; }
/* --- end of the Attention canvas views --- */
/* --- Curves --- */
.curves-view { position: relative; }
/* --- end of curves --- */
/* --- The head view's note (and its SVG button) --- */
.attn-note { margin: 0; }
/* --- end of the note --- */"""
    kept = standalone.view_css(css)
    assert ".attn-view" in kept and ".attn-note" in kept and "SVG button" in kept
    assert ".curves-view" not in kept and "color: red" not in kept
    real = standalone.view_css()
    assert all(name in real for name in (".attn-caption", ".neuron-caption", ".emb-caption"))
