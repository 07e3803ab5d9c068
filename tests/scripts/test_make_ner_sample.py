"""The named-entity sample's builder (scripts/make_ner_sample.py) on a small WNUT-shaped file made here: the first
sentences in order, hashtags kept as words, damaged tags refused by line; and the bundled sample itself reads as
BIO-tagged sentences of WNUT's six types. No test reads the WNUT source."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.data.tagged_text import read_tagged_file
from scripts.make_ner_sample import OUT, TYPES, as_tsv, build, check, main

WNUT_SHAPED = ("@paulwalk\tO\nEmpire\tB-location\nState\tI-location\nBuilding\tI-location\n\t\n"
               "#Apple\tB-corporation\nrocks\tO\n\n"
               "Harry\tB-creative-work\nPotter\tI-creative-work\n\t\n")


def test_the_first_sentences_in_order_with_hashtags_as_words(tmp_path: Path) -> None:
    source = tmp_path / "wnut17train.conll"
    source.write_text(WNUT_SHAPED, encoding="utf-8")
    out = tmp_path / "sample.tsv"
    main(["--source", str(source), "--count", "2", "--out", str(out)])
    sentences = read_tagged_file(out)
    assert [(s.words, s.tags) for s in sentences] == [
        (["@paulwalk", "Empire", "State", "Building"], ["O", "B-location", "I-location", "I-location"]),
        (["#Apple", "rocks"], ["B-corporation", "O"])]
    assert out.read_text(encoding="utf-8") == as_tsv(sentences)          # read back, written the same


@pytest.mark.parametrize("text, message", [
    ("Paris\tB-city\n", "line 1: the tag 'B-city' is not O or B-/I- of person"),
    ("the\tO\nParis\tI-location\n", "line 1: 'I-location' follows 'O'"),
    ("Paris\tB-person\nHilton\tI-location\n", "'I-location' follows 'B-person'"),
])
def test_a_damaged_tag_is_refused_naming_the_sentence(tmp_path: Path, text: str, message: str) -> None:
    source = tmp_path / "bad.conll"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        build(read_tagged_file(source), 1)


def test_asking_for_more_sentences_than_the_source_has_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "w.conll"
    source.write_text(WNUT_SHAPED, encoding="utf-8")
    with pytest.raises(ValueError, match="count is 4; the source has 3 sentences"):
        build(read_tagged_file(source), 4)


def test_the_bundled_sample_is_2000_bio_tagged_sentences_with_entities_of_every_type() -> None:
    sentences = read_tagged_file(OUT)
    assert len(sentences) == 2000
    for sentence in sentences:
        check(sentence)
    kinds = {t[2:] for s in sentences for t in s.tags if t.startswith("B-")}
    assert kinds == set(TYPES)
    assert sum(w.startswith("#") for s in sentences for w in s.words) > 100     # the hashtags are words
