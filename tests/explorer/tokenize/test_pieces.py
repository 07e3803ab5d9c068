"""The Tokenize tab's piece view: the pieces the model sees, in order, escaped, with [UNK], ## and offsets."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from engine.checkpoints.hf_format import ASSETS  # noqa: E402
from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from explorer.tokenize.pieces import MAX_CUT_SHOWN, pieces_html  # noqa: E402

TOKENIZER = WordPieceTokenizer.from_file(ASSETS / "tokenizer")   # the bundled bert-base-uncased vocabulary


@dataclass
class Piece:
    classes: list[str]
    title: str
    text: str = ""
    sub: str = ""
    word: int | None = None          # which wp-word group (None: not in one)


class View(HTMLParser):
    """The strip's pieces, as a browser would read them (entities decoded)."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[Piece] = []
        self.marks: list[str] = []          # the strip's other spans (✂, "… more cut")
        self._targets: list[tuple[str, int] | None] = []   # per open tag: where its text goes
        self._words = 0
        self._in_strip = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        target = self._targets[-1] if self._targets else None
        self._in_strip = self._in_strip or "wp-strip" in classes
        if self._in_strip and "wp-word" in classes:
            self._words += 1
            target = None
        elif self._in_strip and "wp" in classes:
            inside = any(t == ("word", 0) for t in self._targets)
            self.pieces.append(Piece(classes, a.get("title", ""), word=self._words if inside else None))
            target = ("text", len(self.pieces) - 1)
        elif self._in_strip and tag == "sub":
            target = ("sub", len(self.pieces) - 1)
        elif self._in_strip and tag == "span":
            self.marks.append("")
            target = ("mark", len(self.marks) - 1)
        self._targets.append(("word", 0) if "wp-word" in classes else target)

    def handle_endtag(self, tag):
        self._targets.pop()

    def handle_data(self, data):
        target = self._targets[-1] if self._targets else None
        if target is None or target[0] == "word":
            return
        kind, i = target
        if kind == "mark":
            self.marks[i] += data
        else:
            piece = self.pieces[i]
            setattr(piece, kind, getattr(piece, kind) + data)


def view(text: str, pair: str | None = None, max_length: int = 128) -> tuple[View, object]:
    expl = TOKENIZER.explain(text, pair, max_length=max_length)
    parsed = View()
    parsed.feed(pieces_html(expl))
    return parsed, expl


def test_the_pieces_are_the_ones_the_model_sees_in_order():
    parsed, expl = view("Tokenization of ünïcödé 🤗")
    assert [p.text for p in parsed.pieces] == expl.encoding.tokens == [
        "[CLS]", "token", "##ization", "of", "unicode", "[UNK]", "[SEP]"]   # not "Token" "ization" "ünïcödé" "🤗"


def test_continuation_pieces_keep_hash_and_join_their_word():
    parsed, _ = view("Tokenization embeddings")
    by_text = {p.text: p for p in parsed.pieces}
    token, ization, em, bed = by_text["token"], by_text["##ization"], by_text["em"], by_text["##bed"]
    assert "wp-cont" in ization.classes and "wp-cont" in bed.classes and "wp-cont" not in token.classes
    assert token.word == ization.word != em.word == bed.word == by_text["##s"].word   # one group per word
    colour = [c for c in token.classes if c.startswith("wp-w")]
    assert colour == [c for c in ization.classes if c.startswith("wp-w")]            # one colour per word
    assert colour != [c for c in em.classes if c.startswith("wp-w")]                 # neighbours differ
    assert by_text["[CLS]"].word is None and "wp-special" in by_text["[CLS]"].classes


def test_unknown_pieces_are_marked_with_the_text_they_replaced():
    parsed, _ = view("café 🤗 ok")
    unk = [p for p in parsed.pieces if "wp-unk" in p.classes]
    assert len(unk) == 1 and unk[0].text == "[UNK]" and unk[0].sub == "🤗"
    assert "no piece for “🤗”" in unk[0].title
    assert all("wp-unk" not in p.classes for p in parsed.pieces if p.text != "[UNK]")


def test_hover_text_gives_position_id_and_source_characters():
    parsed, expl = view("Tokenization rocks")
    ization = parsed.pieces[2]
    assert ization.title.splitlines() == [
        "##ization · position 2",
        f"id {TOKENIZER.token_to_id('##ization')} · segment A (type id 0), word 0",
        "chars 5–12 of text A: “ization”",
    ]
    assert parsed.pieces[0].title.splitlines() == ["[CLS] · position 0", "id 101 · special token"]
    for piece, row in zip(parsed.pieces, expl.rows):
        assert f"position {row.index}" in piece.title and f"id {row.id}" in piece.title


def test_everything_is_escaped():
    hostile = "<script>alert('x')</script> & \"quoted\" <b>bold</b> 🤗"
    html = pieces_html(TOKENIZER.explain(hostile))
    assert "<script" not in html and "<b>" not in html and "alert('x')" not in html
    parsed = View()
    parsed.feed(html)
    assert [p.text for p in parsed.pieces][1:6] == ["<", "script", ">", "alert", "("]   # shown as text
    quote = next(p for p in parsed.pieces if p.text == '"')
    assert '“"”' in quote.title                                 # the attribute survived the quote inside it
    amp = next(p for p in parsed.pieces if p.text == "&")
    at = hostile.index("&")
    assert f"chars {at}–{at + 1} of text A: “&”" in amp.title
    assert next(p for p in parsed.pieces if "wp-unk" in p.classes).sub == "🤗"


def test_segments_are_told_apart():
    parsed, _ = view("Who was Jim Henson?", "Jim Henson was a nice puppet")
    segments = ["A" if "wp-A" in p.classes else "B" if "wp-B" in p.classes else "special" for p in parsed.pieces]
    assert segments == ["special"] + ["A"] * 5 + ["special"] + ["B"] * 6 + ["special"]
    assert "segment B (type id 1)" in parsed.pieces[7].title and "of text B: “Jim”" in parsed.pieces[7].title


def test_cut_pieces_are_marked_before_their_segments_sep():
    parsed, expl = view("one two three four five six", "seven eight nine ten", max_length=9)
    texts = [p.text for p in parsed.pieces]
    assert [p.text for p in parsed.pieces if "wp-cut" not in p.classes] == expl.encoding.tokens
    cut = [p.text for p in parsed.pieces if "wp-cut" in p.classes]
    assert cut == [r.token for r in expl.dropped] and len(cut) == expl.num_truncated_tokens
    first_sep = texts.index("[SEP]")
    assert set(texts[first_sep - 3:first_sep]) <= set(cut) and "wp-cut" in parsed.pieces[first_sep - 1].classes
    assert parsed.marks.count("✂") == 2                         # one mark per cut segment
    assert all("the model never sees" in p.title for p in parsed.pieces if "wp-cut" in p.classes)


@pytest.mark.parametrize("words", [500, 5000])     # 5000: more than the engine describes (MAX_DROPPED_ROWS)
def test_a_long_cut_tail_is_counted_not_drawn(words):
    parsed, expl = view("word " * words, max_length=16)
    cut = [p for p in parsed.pieces if "wp-cut" in p.classes]
    assert len(cut) == MAX_CUT_SHOWN and expl.num_truncated_tokens == words - 14
    assert f"… and {words - 14 - MAX_CUT_SHOWN:,} more cut" in parsed.marks


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_text_shows_only_the_specials(text):
    parsed, _ = view(text)
    assert [p.text for p in parsed.pieces] == ["[CLS]", "[SEP]"]
