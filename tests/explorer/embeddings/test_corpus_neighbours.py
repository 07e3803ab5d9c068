"""Embeddings tab, nearest contextual neighbours in a corpus, served: an index is built from pasted text or the
built-in corpus and searched through gradio_client; the neighbour is marked in its (escaped) sentence; bad
input is one sentence; the user events clear their outputs on failure."""
from __future__ import annotations

import re

import gradio as gr
import pytest
from gradio_client import handle_file

from support.event_helpers import failure_clears
from explorer.embeddings import corpus_neighbours
from support.hostile_helpers import call, expect_error
from support.probing_helpers import make_services, tab_app

pytestmark = pytest.mark.usefixtures("one_thread")
CORPUS = "The cat sat on the mat. A dog ran in the house. The <b>bird</b> was red."


@pytest.fixture(scope="module")
def app(tiny_tokenizer) -> tuple[gr.Blocks, dict]:
    return tab_app(make_services(tiny_tokenizer), corpus_neighbours.build_ui)



def test_build_from_pasted_text_then_find_a_token_in_its_sentence(client) -> None:
    expect_error(call(client, "default", "the dog ran .", 2, 1, 5, api_name="/neighbours"),
                 "no index for this model at layer 1 yet: build one first")
    status = client.predict("default", "text", CORPUS, 1, 100, api_name="/neighbours_index")
    assert "**3 sentences**" in status and "layer 1" in status
    found = client.predict("default", "a dog ran in the house .", 2, 1, 3, api_name="/neighbours")
    assert found.count("<li>") == 3 and "<mark>dog</mark>" in found             # itself first, marked in place
    assert found.startswith('<div class="corpus-neighbours">')                   # what the CSS colours the mark by
    assert "<b>" not in found                                                     # corpus text is escaped
    for named in ("dog", "2: dog", 2.0):                                          # a piece, the dropdown's label
        assert client.predict("default", "a dog ran in the house .", named, 1, 3, api_name="/neighbours") == found


def test_an_uploaded_file_is_a_corpus_too(client, tmp_path) -> None:
    upload = tmp_path / "animals.txt"
    upload.write_text("The cat sat on the mat.\n\nA dog ran in the house. The bird was red.\n", encoding="utf-8")
    status = client.predict("default", "file", "", 1, 100, handle_file(str(upload)), api_name="/neighbours_index")
    assert "**3 sentences**" in status
    for name, content, message in (("binary.txt", bytes(range(256)), "looks like a binary file"),
                                   ("latin1.txt", "caf\u00e9 au lait.".encode("latin-1"), "UTF-8"), ("empty.txt", b"", "empty"),
                                   ("notes.csv", b"a,b\n", "Invalid file type")):
        bad = tmp_path / name
        bad.write_bytes(content)
        outcome = call(client, "default", "file", "", 1, 100, handle_file(str(bad)), api_name="/neighbours_index")
        expect_error(outcome, message)
        assert str(tmp_path) not in outcome.error                                # no server path in the message
    expect_error(call(client, "default", "file", "", 1, 100, None, api_name="/neighbours_index"), "Upload a .txt")


def test_the_built_in_corpus_gives_the_first_sentences_asked_for(client) -> None:
    status = client.predict("default", "shakespeare", "", 2, 5, api_name="/neighbours_index")
    assert "**5 sentences**" in status and "layer 2" in status


def test_the_bundled_two_senses_corpus_is_offered_and_chosen_first(app, client) -> None:
    """The section opens on the bundled corpus of two-sense words, and its layer field says the one layer rule
    the same way as the contextual view's (0 = the embeddings' output)."""
    _, widgets = app
    assert widgets["source"].value == corpus_neighbours.TWO_SENSES
    assert widgets["layer"].value == corpus_neighbours.DEFAULT_LAYER
    assert "0 = the embeddings' output, 1 to L = the encoder layers' outputs" in widgets["layer"].label
    status = client.predict("default", "two-senses", "", 1, 5_000, api_name="/neighbours_index")
    assert f"**{len(corpus_neighbours.two_senses_sentences())} sentences**" in status


@pytest.mark.parametrize("api,args,message", [
    ("/neighbours_index", ("default", "text", "", 1, 10), "Paste the text to index"),
    ("/neighbours_index", ("default", "web", "x", 1, 10), "is not in the list of choices"),   # Gradio's check
    ("/neighbours_index", ("default", "text", CORPUS, 7, 10), "Layer must be a whole number from 0 to 2"),
    ("/neighbours_index", ("nope", "text", CORPUS, 1, 10), "Models available now"),
    ("/neighbours", ("default", "", 1, 1, 3), "Type a sentence"),
    ("/neighbours", ("default", "the cat .", 40, 1, 3), "The token position must be a whole number from 0 to 4, got 40"),
    ("/neighbours", ("default", "the cat .", "zebra", 1, 3), "Choose a token of the sentence"),
])
def test_bad_input_is_one_sentence(client, api, args, message) -> None:
    expect_error(call(client, *args, api_name=api), message)


def test_every_user_event_clears_its_outputs_on_failure(app) -> None:
    demo, widgets = app
    assert failure_clears(demo, "neighbours_index", [widgets["index_status"]])
    for api_name in ("neighbours", "neighbours_submit", "neighbours_example_run"):
        assert failure_clears(demo, api_name, [widgets["found"]]), api_name


def test_in_context_marks_the_span_and_cuts_long_sentences() -> None:
    text = "x" * 200 + " bank " + "y" * 200
    shown = corpus_neighbours.in_context(text, 201, 205, around=10)
    assert shown == "…" + "x" * 9 + " <mark>bank</mark> " + "y" * 9 + "…"
    assert corpus_neighbours.in_context("a <i> b", 2, 5) == "a <mark>&lt;i&gt;</mark> b"


def test_the_token_follows_its_word_into_a_new_sentence() -> None:
    old = ["[CLS]", "we", "sat", "on", "the", "bank", "[SEP]"]
    new = ["[CLS]", "my", "money", "is", "in", "the", "bank", "[SEP]"]
    labels = [f"{i}: {piece}" for i, piece in enumerate(new)]
    assert corpus_neighbours.follow_token(labels, "5: bank") == "6: bank"        # the same word, where it is now
    assert corpus_neighbours.follow_token(labels, "bank") == "6: bank"           # the first choice before any
    assert corpus_neighbours.follow_token(labels, "2: sat") == "1: my"           # gone: the first word
    assert corpus_neighbours.follow_token([], "bank") is None
    assert corpus_neighbours.resolve_position(new, "5: bank") == 6               # a label from the old sentence
    assert corpus_neighbours.resolve_position(old, "5: bank") == 5
    assert corpus_neighbours.resolve_position(new, 3) == 3 and corpus_neighbours.resolve_position(new, "money") == 2


def _declarations(css: str, selector: str) -> dict[str, str]:
    """The declarations of the rule whose selector is exactly ``selector`` in ``css``."""
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S)):
        if selector in (s.strip() for s in selectors.split(",")):
            return {k.strip(): v.strip() for k, v in (d.split(":", 1) for d in body.split(";") if ":" in d)}
    raise AssertionError(f"no rule for {selector!r} in assets/style.css")


def _luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a #rrggbb colour."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@pytest.mark.parametrize("selector", [".corpus-neighbours mark", ".dark .corpus-neighbours mark"])
def test_the_marked_neighbour_reads_in_both_themes(selector: str) -> None:
    """The word marked in each sentence has its own text and background colour in each theme (the browser's
    bright yellow under the dark theme's white text was unreadable), at WCAG AA's contrast (4.5:1) or more."""
    import explorer.page

    rule = _declarations(explorer.page.CSS, selector)
    dark, light = sorted((_luminance(rule["color"]), _luminance(rule["background"])))
    assert (light + 0.05) / (dark + 0.05) >= 4.5, rule
