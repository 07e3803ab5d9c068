"""``explorer.glossary``: every entry is one sentence with a unique anchor, ``gloss`` escapes what it writes and
names the entry's anchor (as a class, which Gradio's Markdown keeps, and as ``data-gloss``), the 17 UPOS tags are
spelled out, and the Glossary tab shows every entry and the layer rule."""
from __future__ import annotations

import html
import re

import pytest

from explorer import glossary_tab
from explorer.glossary import (GLOSSARY, LAYER_RULE, UPOS_NAMES, Entry, entry, gloss, glossary_markdown, upos_meaning,
                               upos_short)
from explorer.tab_registry import TABS

UD_V2_UPOS = {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
              "SCONJ", "SYM", "VERB", "X"}
# The words the issue found unexplained, and the app's basic vocabulary: each must have an entry.
MUST_EXPLAIN = ["nats", "logit", "CKA", "doc stride", "null score", "UPOS", "WordPiece", "[CLS]", "[SEP]", "[MASK]",
                "softmax", "attention head", "layer", "MLM", "NSP", "fine-tune", "perplexity", "attribution"]


def sentences(text: str) -> int:
    """How many sentences ``text`` holds: a full stop, ! or ? followed by a space and a capital letter ends one
    (not "e.g. NOUN", not "0.69 nats")."""
    cleaned = re.sub(r"\b(e\.g|i\.e|etc|vs)\.", "", text)
    return 1 + len(re.findall(r"[.!?] +(?=[A-Z\[])", cleaned))


@pytest.mark.parametrize("item", list(GLOSSARY.values()), ids=lambda e: e.term)
def test_every_entry_is_one_sentence(item: Entry) -> None:
    if item.term == "layer":                      # the layer rule: one rule, two sentences (layers, heads)
        assert item.meaning == LAYER_RULE
        return
    assert item.meaning.endswith((".", ")")) and item.meaning[0].isupper(), item.meaning
    assert sentences(item.meaning) == 1, item.meaning
    assert len(item.meaning) <= 240 and "\n" not in item.meaning


def test_the_sentence_counter_counts() -> None:
    assert sentences("One thing, e.g. NOUN, 0.69 nats.") == 1
    assert sentences("One. Two [CLS] here.") == 2


def test_anchors_are_unique_html_ids_and_terms_unique_in_any_case() -> None:
    anchors = [item.anchor for item in GLOSSARY.values()]
    assert len(set(anchors)) == len(anchors) == len(GLOSSARY) >= 35
    assert all(re.fullmatch(r"gloss-[a-z0-9]+(-[a-z0-9]+)*", anchor) for anchor in anchors), anchors
    assert entry("[CLS]").anchor == "gloss-cls" and entry("doc stride").anchor == "gloss-doc-stride"
    assert "gloss-target" not in anchors                         # the class the page script marks an entry with


@pytest.mark.parametrize("term", MUST_EXPLAIN)
def test_the_words_a_learner_meets_are_explained(term: str) -> None:
    assert entry(term).term.lower() == term.lower()
    assert entry(term.upper()) is entry(term.lower()) is entry(term)         # any case


def test_an_unknown_word_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="not in the glossary; known: .*doc stride"):
        entry("flux capacitor")


def test_gloss_escapes_and_names_the_anchor() -> None:
    made = gloss("[CLS]", "<b>first</b> & \"token\"")
    assert made.startswith('<abbr class="gloss gloss-cls" title="') and made.endswith("</abbr>")
    assert "&lt;b&gt;first&lt;/b&gt; &amp; &quot;token&quot;" in made and "<b>" not in made
    assert 'data-gloss="gloss-cls"' in made
    title = re.search(r'title="([^"]*)"', made)
    assert title is not None and html.unescape(title.group(1)) == entry("[CLS]").meaning
    assert ">[CLS]</abbr>" in gloss("[cls]")                   # the term as written in the glossary by default
    quoted = gloss("UPOS")                                        # a sentence with quotes and parentheses
    assert html.unescape(re.search(r'title="([^"]*)"', quoted).group(1)) == entry("UPOS").meaning
    with pytest.raises(KeyError):
        gloss("no such word")


def test_all_17_upos_tags_are_spelled_out() -> None:
    assert set(UPOS_NAMES) == UD_V2_UPOS
    assert upos_meaning("ADP") == "adposition (a preposition such as 'in', 'of')"
    assert upos_meaning("cconj").startswith("coordinating conjunction")                # any case
    assert upos_meaning("X") == "other (a foreign word, a typo, a code)"
    assert upos_meaning("B-PER") == "" and upos_meaning("") == ""               # other labels: none
    assert upos_meaning("adp") == UPOS_NAMES["ADP"] and upos_short("ADP") == "adposition" and upos_short("VERB") == "verb"
    assert upos_meaning("B-PER") == upos_short("B-PER") == ""


def test_the_glossary_lists_every_entry_a_to_z_and_every_tag() -> None:
    text = glossary_markdown()
    anchors = re.findall(r'<a id="([^"]+)"></a>', text)
    assert sorted(anchors) == sorted(item.anchor for item in GLOSSARY.values())
    terms = [item.term for item in sorted(GLOSSARY.values(), key=lambda e: e.term.strip("[]").lower())]
    assert [html.unescape(t) for t in re.findall(r"</a>\*\*(.+?)\*\*", text)] == terms
    assert all(f"**{tag}**" in text for tag in UD_V2_UPOS)


def test_the_glossary_tab_is_the_last_and_shows_the_layer_rule() -> None:
    assert TABS[-1].title == glossary_tab.TAB_TITLE == "Glossary" and TABS[-1].module is glossary_tab
    page = glossary_tab.page_markdown()
    assert page.startswith("**How layers are numbered.** " + LAYER_RULE) and glossary_markdown() in page
    assert glossary_tab.example_calls(None) == []             # type: ignore[arg-type]  # no model, nothing to warm
