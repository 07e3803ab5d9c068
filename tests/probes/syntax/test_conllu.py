"""The CoNLL-U reader: the UD rules (multiword tokens, empty nodes, subtypes, comments) and a clear sentence
naming the line for every broken file."""
from __future__ import annotations

import os

import pytest

from engine.probes.syntax.conllu import (
    SAMPLE_PATH, DependencySentence, fingerprint, parse_conllu, read_conllu, read_sample, universal_relation,
)
from engine.regular_files import NotRegularFile, TooLarge


def line(*columns: object) -> str:
    return "\t".join(str(c) for c in columns)


def word(i, form, upos, head, rel) -> str:
    return line(i, form, form.lower(), upos, "_", "_", head, rel, "_", "_")


GOOD = "\n".join([
    "# sent_id = s1",
    "# text = I don't like it.",
    word(1, "I", "PRON", 3, "nsubj"),
    line("2-3", "don't", "_", "_", "_", "_", "_", "_", "_", "_"),
    word(2, "do", "AUX", 4, "aux"),
    word(3, "n't", "PART", 4, "advmod"),
    word(4, "like", "VERB", 0, "root"),
    line("4.1", "like", "like", "VERB", "_", "_", "_", "_", "4:conj", "_"),
    word(5, "it", "PRON", 4, "obj"),
    word(6, ".", "PUNCT", 4, "punct"),
    "",
    "# text = Nice poss",
    word(1, "Her", "PRON", 2, "nmod:poss"),
    word(2, "dog", "NOUN", 0, "root"),
    "",
])


def test_ud_rules_multiword_tokens_and_empty_nodes_are_skipped() -> None:
    """A multiword token's surface form and an empty node are not words; heads still count syntactic words."""
    first, second = parse_conllu(GOOD)
    assert first.words == ("I", "do", "n't", "like", "it", ".")
    assert first.heads == (3, 4, 4, 0, 4, 4)
    assert first.relations == ("nsubj", "aux", "advmod", "root", "obj", "punct")
    assert first.upos == ("PRON", "AUX", "PART", "VERB", "PRON", "PUNCT")
    assert first.sent_id == "s1" and first.text == "I don't like it." and first.line == 3
    assert second.relations == ("nmod", "root")                   # the universal part: "nmod:poss" -> "nmod"
    assert universal_relation("obl:tmod") == "obl" and universal_relation("det") == "det"


def test_windows_line_ends_a_bom_and_no_final_blank_line_are_fine() -> None:
    text = "\ufeff" + GOOD.strip().replace("\n", "\r\n")
    assert [s.words for s in parse_conllu(text)] == [s.words for s in parse_conllu(GOOD)]


def _broken(replace: str, by: str) -> str:
    assert replace in GOOD
    return GOOD.replace(replace, by, 1)


@pytest.mark.parametrize("text, message", [
    (_broken(word(5, "it", "PRON", 4, "obj"), "5\tit\tit\tPRON\t_\t_\t4\tobj"), "line 9 has 8 tab-separated"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(5, "it", "PRON", 9, "obj")), "word 5's head is 9, but the sentence has 6"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(5, "it", "PRON", "x", "obj")), "line 9: the HEAD of word 5 is 'x'"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(5, "it", "PRON", 5, "obj")), "word 5 is its own head"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(5, "it", "PRON", 0, "root")), "has 2 root words"),
    (_broken(word(4, "like", "VERB", 0, "root"), word(4, "like", "VERB", 5, "ccomp")), "has 0 root words"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(5, "it", "PRONOUN", 4, "obj")), "'PRONOUN' is not a universal"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(7, "it", "PRON", 4, "obj")), "word ID '7' should be 5"),
    (_broken(word(5, "it", "PRON", 4, "obj"), word(5, "it", "PRON", 4, "_")), "word 5 has no dependency relation"),
    (_broken(line("2-3", "don't", *"_" * 8), line("3-4", "don't", *"_" * 8)), "'3-4' is not a multiword token range"),
    (_broken(line("4.1", "like", "like", "VERB", "_", "_", "_", "_", "4:conj", "_"),
             line("2.1", "like", "like", "VERB", "_", "_", "_", "_", "4:conj", "_")), "'2.1' is not an empty node"),
    (_broken(word(2, "dog", "NOUN", 0, "root"), word(2, "dog", "NOUN", 0, "nsubj")), "the root's relation is 'root'"),
    ("hello world\n", "line 1 has 1 tab-separated column"),
    ("# only a comment\n\n", "holds no sentence"),
    ("", "holds no sentence"),
])
def test_broken_files_raise_a_sentence_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        parse_conllu(text, "mine.conllu")
    assert str(info.value).startswith("mine.conllu")


def test_a_cycle_in_the_heads_is_refused() -> None:
    text = "\n".join([word(1, "a", "DET", 2, "det"), word(2, "b", "NOUN", 1, "nmod"),
                      word(3, "c", "VERB", 0, "root"), ""])
    with pytest.raises(ValueError, match="go round in a cycle"):
        parse_conllu(text)


def test_files_are_untrusted(tmp_path) -> None:
    path = tmp_path / "ok.conllu"
    path.write_text(GOOD, encoding="utf-8")
    assert len(read_conllu(path)) == 2
    with pytest.raises(TooLarge):
        read_conllu(path, max_bytes=100)
    pipe = tmp_path / "pipe.conllu"
    os.mkfifo(pipe)
    with pytest.raises(NotRegularFile):
        read_conllu(pipe)                                          # opened without blocking, refused
    (tmp_path / "latin1.conllu").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        read_conllu(tmp_path / "latin1.conllu")


def test_the_bundled_sample() -> None:
    """300 sentences of 5 to 40 words, every relation universal, with multiword tokens kept in the file."""
    sentences = read_sample()
    assert len(sentences) == 300
    assert all(5 <= len(s) <= 40 for s in sentences)
    assert all(":" not in r for s in sentences for r in s.relations)
    assert isinstance(sentences[0], DependencySentence) and sentences[0].text == "From the AP comes this story :"
    raw = SAMPLE_PATH.read_text(encoding="utf-8")
    assert any(ln.split("\t", 1)[0].count("-") == 1 for ln in raw.splitlines() if "\t" in ln)   # multiword tokens
    assert fingerprint(sentences) == fingerprint(read_sample()) != fingerprint(sentences[1:])
