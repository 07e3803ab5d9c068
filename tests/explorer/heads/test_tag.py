"""Heads tab, Tag words: the handler's outputs equal engine.probes.tag (BIO entities merged, other tags word by
word), the HTML is escaped and reads back as the text (parsed as a browser does), bad input and a model without
the token-classification head are one clear sentence."""
from __future__ import annotations

from html.parser import HTMLParser

import gradio as gr
import pytest

from engine.probes.tag import tag_details, tag_words
from explorer.formatting import percent, rounded
from explorer.heads import tag as section
from explorer.heads.tag_html import color_classes, tagged_html
from explorer.ui_errors import friendly_errors
from support.heads_helpers import BIO, UPOS, head_services

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "walter played with xavier in paris, then ran!"


class Marks(HTMLParser):
    """The body's text, and each mark's (class, title, word text, caption)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.body, self.marks, self.stack = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        in_legend = any("tw-legend" in c for _, c in self.stack)
        self.stack.append((tag, attrs.get("class", "")))
        if tag == "mark" and not in_legend:
            self.marks.append([attrs["class"], attrs.get("title"), "", ""])

    def handle_endtag(self, tag):
        self.stack.pop()

    def handle_data(self, data):
        classes = [c for _, c in self.stack]
        if "tw-legend" in classes:
            return
        if "tw-tag" in classes:
            self.marks[-1][3] += data
            return
        if "tw-text" in classes:
            self.marks[-1][2] += data
        self.body.append(data)


def parse(html: str) -> Marks:
    view = Marks()
    view.feed(html)
    return view


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return head_services(tiny_tokenizer)


@pytest.mark.parametrize("key,labels", [("tagger", BIO), ("pos", UPOS)])
def test_outputs_equal_the_engine(services, key, labels) -> None:
    summary, html, table, results = section.predict(services, key, TEXT)
    loaded = services.model(key)
    expected = tag_details(loaded, TEXT)
    assert results == [{**r, "score": rounded(r["score"])} for r in tag_words(loaded, TEXT)]
    assert list(table["word"]) == [TEXT[w.start:w.end] for w in expected.words]
    assert list(table["tag"]) == [w.label for w in expected.words]
    assert list(table["probability"]) == [percent(w.score) for w in expected.words]
    view = parse(html)
    assert "".join(view.body) == TEXT                                        # every character once, in order
    units = [g for g in expected.groups if g.label != "O"] if expected.bio else expected.words
    assert [m[2] for m in view.marks] == [TEXT[u.start:u.end] for u in units]
    assert [m[3] for m in view.marks] == [f"{u.label} {percent(u.score)}" for u in units]
    colors = color_classes(list(labels.values()))
    assert [m[0] for m in view.marks] == [f"tw tw-c{colors[u.label.split('-', 1)[-1]]}" for u in units]
    assert (" entit" in summary) == (key == "tagger") and summary.startswith(f"**{len(expected.words)} words**")


def test_colours_follow_the_models_label_order() -> None:
    assert color_classes(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]) == {"PER": 0, "LOC": 1}
    assert color_classes([f"T{i}" for i in range(12)])["T11"] == 1                  # cycled after 10


def test_the_html_is_escaped() -> None:
    text = '<script>alert("x")</script> & "q"'
    html = tagged_html(text, [(0, 8, '<b>"X"</b>', 0.5), (29, 30, "O", 0.9)], {'<b>"X"</b>': 0})
    assert "<script>" not in html and "<b>" not in html
    view = parse(html)
    assert "".join(view.body) == text
    assert view.marks == [["tw tw-c0", '<b>"X"</b> 50%', "<script>", '<b>"X"</b> 50%']]


@pytest.mark.parametrize("text,match", [("", "Type a sentence to tag"), ("cat " * 70, "72 tokens long")])
def test_bad_input_is_a_clear_error(services, text, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(section.predict)(services, "tagger", text)


@pytest.mark.parametrize("key", ["default", "encoder", "chooser"])
def test_a_model_without_the_head_is_told_how_to_get_one(services, key) -> None:
    with pytest.raises(gr.Error, match=r"has no token classification head .*fine-tune it for token classification "
                                      r"\(tagging\) in the Fine-tune tab, then pick the result"):
        friendly_errors(section.predict)(services, key, TEXT)
