"""Issue 45, item 7a: a CoNLL-U file's numbers are bounded before they are read. A HEAD of 5,000 digits gave
Python's "Exceeds the limit (4300 digits)" with no file or line, other scripts' digits ("²") crashed ``int()`` and
a multiword range "1-99" in a four-word sentence passed; each is now the reader's own sentence naming the line."""
from __future__ import annotations

import pytest

from engine.probes.syntax.conllu import MAX_ID_DIGITS, parse_conllu

HUGE = "9" * 5000


def word(i: object, form: str, upos: str, head: object, rel: str) -> str:
    return "\t".join(str(c) for c in (i, form, form.lower(), upos, "_", "_", head, rel, "_", "_"))


def multiword(span: str) -> str:
    return "\t".join([span, "dont", *"_" * 8])


def sentence(*lines: str) -> str:
    return "\n".join(["# text = a test", *lines, ""])


FOUR = [word(1, "I", "PRON", 3, "nsubj"), word(2, "do", "AUX", 3, "aux"), word(3, "like", "VERB", 0, "root"),
        word(4, "it", "PRON", 3, "obj")]


def with_line(index: int, replacement: str) -> str:
    """The four-word sentence with word ``index`` (0-based) replaced, or ``replacement`` put before it."""
    lines = list(FOUR)
    lines[index] = replacement
    return sentence(*lines)


@pytest.mark.parametrize("text, message", [
    (with_line(3, word(4, "it", "PRON", HUGE, "obj")), "line 5: the HEAD of word 4 is '99999999999999999999'"),
    (with_line(3, word(HUGE, "it", "PRON", 3, "obj")), "line 5: word ID '99999999999999999999' should be 4"),
    (with_line(3, word(4, "it", "PRON", "1" + "0" * MAX_ID_DIGITS, "obj")), "line 5: the HEAD of word 4 is '1000000'"),
    (with_line(3, word(4, "it", "PRON", "²", "obj")), "line 5: the HEAD of word 4 is '²'"),
    (with_line(3, word(4, "it", "PRON", "٣", "obj")), "line 5: the HEAD of word 4 is '٣'"),   # Arabic-Indic 3
    (with_line(3, word("٤", "it", "PRON", 3, "obj")), "line 5: word ID '٤' should be 4"),
    (sentence(multiword(f"1-{HUGE}"), *FOUR), "line 2: '1-999999999999999999' is not a multiword token range"),
    (sentence(multiword(f"{HUGE}-1"), *FOUR), "line 2: '99999999999999999999' is not a multiword token range"),
    (sentence(*FOUR[:2], "\t".join([f"2.{HUGE}", "x", *"_" * 8]), *FOUR[2:]), "line 4: '2.999999999999999999' is not an empty node"),
    (sentence(*FOUR[:2], "\t".join([f"{HUGE}.1", "x", *"_" * 8]), *FOUR[2:]), "line 4: '99999999999999999999' is not an empty node"),
    (sentence(multiword("1-99"), *FOUR), "line 2: the multiword token '1-99' ends at word 99, but the sentence has 4 words"),
    (sentence(*FOUR[:3], multiword("4-5"), FOUR[3]), "line 5: the multiword token '4-5' ends at word 5, but the sentence has 4"),
])
def test_numbers_are_bounded_and_named_by_line(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_conllu(text, "mine.conllu")
    said = str(raised.value)
    assert said.startswith("mine.conllu") and message in said, said[:300]
    assert "4300" not in said and len(said) < 400


def test_ranges_inside_the_sentence_and_six_digit_numbers_still_read() -> None:
    ok = parse_conllu(sentence(multiword("1-2"), *FOUR[:2], multiword("3-4"), *FOUR[2:]))
    assert ok[0].words == ("I", "do", "like", "it") and ok[0].heads == (3, 3, 0, 3)
    with pytest.raises(ValueError, match="word 4's head is 999999, but the sentence has 4 words"):
        parse_conllu(with_line(3, word(4, "it", "PRON", "9" * MAX_ID_DIGITS, "obj")))
    assert parse_conllu(with_line(3, word("004", "it", "PRON", "03", "obj")))[0].heads == (3, 3, 0, 3)
