"""Heads tab, Tag words: the handler's outputs equal engine.probes.heads.tag (BIO entities merged, other tags word by
word), the HTML is escaped and reads back as the text (parsed as a browser does), every part-of-speech tag has a
colour of its own and is spelled out (legend, hover, table), bad input and a model without the
token-classification head are one clear sentence."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import gradio as gr
import pytest
from plotly.colors import hex_to_rgb, qualitative

from engine.probes.heads.tag import tag_details, tag_words
from explorer.formatting import percent, rounded
from explorer.heads import tag as section
from explorer.glossary import UPOS_NAMES, gloss
from explorer.heads.tag_html import COLORS, FILL_ALPHA, PALETTE, color_classes, fill, tagged_html
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
    assert list(table["what the tag is"]) == [UPOS_NAMES.get(w.label, "") for w in expected.words]
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
    assert color_classes([f"T{i}" for i in range(COLORS + 2)])[f"T{COLORS + 1}"] == 1   # cycled past the palette


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


class Legend(HTMLParser):
    """The legend's swatches: [tag, name, hover title, fill]."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items, self.inside, self.where = [], False, ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "tw-legend" in (attrs.get("class") or ""):
            self.inside = True
        elif tag == "div":
            self.inside = False
        if self.inside and tag == "mark":
            self.items.append(["", "", attrs["title"], attrs["style"]])
        self.where = attrs.get("class") or ""

    def handle_endtag(self, tag):
        self.where = ""

    def handle_data(self, data):
        if self.inside and self.where in ("tw-tag", "tw-name"):
            self.items[-1][0 if self.where == "tw-tag" else 1] += data


def upos_sentence() -> tuple[str, list[tuple[int, int, str, float]]]:
    """A text of the 17 UPOS tag names, each word tagged as itself."""
    text, spans = "", []
    for tag in UPOS_NAMES:
        spans.append((len(text), len(text) + len(tag), tag, 0.9))
        text += tag + " "
    return text, spans


def test_every_upos_tag_has_a_colour_of_its_own_that_stays_from_one_input_to_the_next() -> None:
    colors = color_classes(list(UPOS_NAMES))
    assert len(UPOS_NAMES) == 17 and len(set(colors.values())) == 17 and COLORS >= 17
    text, spans = upos_sentence()
    fills = dict(re.findall(r'style="background: (rgba\([^)]*\))"[^>]*><span class="tw-text">(\w+)<', tagged_html(
        text, spans, colors)))
    assert len(set(fills)) == 17                                                  # DET, VERB, ADP: no repeats
    again = tagged_html("the cat", [(0, 3, "DET", 0.5), (4, 7, "NOUN", 0.6)], colors)      # another input
    assert f'style="background: {fill(colors["DET"])}"' in again and fill(colors["NOUN"]) in again
    # A library palette (Plotly's Alphabet), translucent so the theme's text colour reads on it, light or dark.
    alphabet = {hex_to_rgb(c) for c in qualitative.Alphabet}
    assert set(PALETTE) <= alphabet and len(set(PALETTE)) == COLORS and 0.2 <= FILL_ALPHA <= 0.4
    for r, g, b in PALETTE:                                   # neither near white nor near black
        assert 0.2 <= (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 <= 0.8


def test_the_legend_and_the_hover_spell_out_each_upos_tag() -> None:
    text, spans = upos_sentence()
    html = tagged_html(text, spans, color_classes(list(UPOS_NAMES)))
    legend = Legend()
    legend.feed(html)
    by_tag = {tag: (name, title) for tag, name, title, _ in legend.items}
    assert list(by_tag) == list(UPOS_NAMES)
    assert by_tag["ADP"] == ("adposition", "ADP — adposition (a preposition such as 'in', 'of')")
    for tag in ("CCONJ", "SCONJ", "PROPN", "X"):
        assert by_tag[tag][0] == UPOS_NAMES[tag].split(" (")[0] and UPOS_NAMES[tag] in by_tag[tag][1]
    marks = parse(html).marks
    assert marks[1][1] == "ADP 90% — adposition (a preposition such as 'in', 'of')" and marks[1][3] == "ADP 90%"
    assert all(UPOS_NAMES[m[2]] in m[1] for m in marks)


def test_named_entity_labels_stay_as_they_are() -> None:
    html = tagged_html("Ada Lovelace", [(0, 12, "B-PER", 0.8)], color_classes(["O", "B-PER", "I-PER"]))
    legend = Legend()
    legend.feed(html)
    assert [item[:3] for item in legend.items] == [["PER", "", "PER"]]
    assert parse(html).marks[0][1:] == ["B-PER 80%", "Ada Lovelace", "B-PER 80%"]


def test_the_intro_links_upos_to_the_glossary_once() -> None:
    assert section.INTRO.count(gloss("UPOS")) == 1 and section.INTRO.count("<abbr") == 1
