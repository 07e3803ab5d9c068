"""explorer/views/export_names.py: what a canvas view's exports are named after. A file name holds the model and the
first words of the input in letters, digits, - and _ only, bounded, whatever the text; the SVG's title shows them
as they are; the values the views draw from carry them (the Attention views', the neuron view's, the Embeddings
maps'), and the page's script puts the same ``safe`` rule and the SVG context before each view's script."""
from __future__ import annotations

import re

import pytest

from engine.probes.attention.neuron_view import neuron_inputs
from engine.probes.inference import attention, embeddings
from explorer.attention import canvas as attention_canvas
from explorer.attention import neuron_canvas
from explorer.embeddings import canvas as embeddings_canvas
from explorer.views import canvas_view
from explorer.views.export_names import export_info, first_words, safe, shown_input
from support.probing_helpers import make_services

FILE_PART = re.compile(r"^[A-Za-z0-9_-]+$")


def test_a_file_name_names_the_model_and_the_inputs_first_words() -> None:
    info = export_info("default", "The cat sat on the mat because it was tired.")
    assert info["stem"] == "bert-explorer_default_the-cat-sat-on-the-mat"
    assert info == {"model": "default", "input": "The cat sat on the mat because it was tired.", "stem": info["stem"]}
    hub = export_info("hub google-bert/bert-base-uncased", "Who was Jim Henson?", "Jim Henson was a puppet")
    assert hub["stem"] == "bert-explorer_hub-google-bert-bert-base-uncased_who-was-jim-henson"
    assert hub["input"] == "Who was Jim Henson? / Jim Henson was a puppet"         # the pair in the title
    run = export_info("checkpoint pretraining-20250101-120000/step-000300", "x")
    assert run["stem"] == "bert-explorer_checkpoint-pretraining-20250101-120000-step-000300_x"


@pytest.mark.parametrize("text", ["../../etc/passwd; rm -rf /", "Café naïve — «quoted» \"x\" <b>&</b>",
                                  "日本語のテキスト", "  \t\n ", "a\u0000b\u202ec" * 50, "word " * 400,
                                  "x" * 500, "[CLS] ## 🙂 :: ??"])
def test_any_text_gives_a_safe_bounded_name(text: str) -> None:
    stem = export_info("local my models/tiny (v2)", text)["stem"]
    assert FILE_PART.match(stem) and len(stem) <= 13 + 1 + 60 + 1 + 40, stem
    assert not stem.endswith(("-", "_")) and "--" not in stem
    words = stem.split("_", 2)[2]
    assert 0 < len(words) <= 40                                                    # something, never empty
    assert len(shown_input(text)) <= 120                                           # the title's input, bounded


def test_the_parts_drop_accents_and_cut_at_a_word() -> None:
    assert safe("Café naïve") == "Cafe-naive" and safe("__a b__") == "a-b" and safe("¿?") == ""
    assert safe("abcdef-ghij", 7) == "abcdef"                                      # no "-" left at the end
    assert first_words("One two three four five six seven") == "one-two-three-four-five-six"
    assert first_words("alpha beta gamma", limit=11) == "alpha-beta"               # whole words within the limit
    assert first_words("!!! ??? hello") == "hello"                                 # symbols alone are skipped
    assert shown_input("a " * 100).endswith("…") and shown_input("a\n\tb", " c ") == "a b / c"


def test_every_view_value_names_its_model_and_input(tiny_tokenizer) -> None:
    loaded = make_services(tiny_tokenizer).model("default")
    text, pair = "the cat sat on the mat", "the dog ran"
    heat = attention_canvas.values(attention(loaded, text, pair, 64), 0, 0, [0])[0]
    neuron = neuron_canvas.value(neuron_inputs(loaded, text, pair), 0, 0, 0, "id")
    dims = embeddings_canvas.dimensions_value(embeddings(loaded, text, pair), "output")
    for value in (heat, neuron, dims):
        assert value["export"] == export_info(loaded.source, text, pair)
        assert value["export"]["stem"] == f"bert-explorer_{safe(loaded.source)}_the-cat-sat-on-the-mat"
        assert len(str(value["export"])) < 300                                     # small on the wire


def test_each_view_script_holds_the_svg_context_and_the_same_safe_rule() -> None:
    js = canvas_view.view_script(attention_canvas.SCRIPT, "mount();")
    assert js.index("window.BertSvg = {") < js.index("window.BertCanvas = {") < js.index("window.BertAttentionViews = {")
    assert "[^A-Za-z0-9_-]+" in js and "-{2,}" in js                               # safe(), as in Python
