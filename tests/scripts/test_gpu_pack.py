"""The GPU session's data pack (scripts/gpu/pack.py, pack_build.py): ids decode back into the engine's sentences,
and a pack that is damaged, swapped, oversized or not a regular file is refused with a sentence, never trained on."""
from __future__ import annotations

import json
import lzma
import os

import numpy as np
import pytest

from engine.text.sentences import split_sentences
from engine.text.tokenizer import WordPieceTokenizer
from scripts.gpu import pack
from scripts.gpu.pack_build import fit_prefix, squad_file
from support.device_imports import ROOT

DOCUMENTS = [["The children ran down to the river.", '"Anarchist" was the term adopted by Robespierre.',
              "It rose (as the rain came) and covered the bank."],
             ["Mr. Smith went to Washington.", "He said: \"here we rest.\"", "(Their land became part of a county.)"]]
SQUAD = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "Paris is in France.", "qas": [
    {"id": "q1", "question": "Where is Paris?", "answers": [{"text": "France", "answer_start": 12}]}]}]}]}
HELDOUT = {"wiki_paragraphs": ["A held-out paragraph about rivers."],
           "squad": [{"id": "h1", "question": "Where?", "context": "In France.", "answers": ["France"]}]}


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(ROOT / "assets" / "tokenizer")


@pytest.fixture
def packed(tmp_path, tokenizer):
    ids = pack.encode_documents(DOCUMENTS, tokenizer)
    pack.write_pack(tmp_path / "pack", tokenizer, ids, SQUAD, HELDOUT)
    return tmp_path / "pack"


def test_ids_decode_into_the_same_sentences_and_ids(tokenizer):
    ids = pack.encode_documents(DOCUMENTS, tokenizer)
    assert ids.dtype == np.uint16 and (ids == pack.DOCUMENT_END).sum() == 2
    texts = list(pack.decode_documents(ids, tokenizer))
    for sentences, text in zip(DOCUMENTS, texts):
        again = split_sentences(text)
        assert len(again) == len(sentences), again
        assert [tokenizer.backend.encode(s, add_special_tokens=False).ids for s in again] == [
            tokenizer.backend.encode(s, add_special_tokens=False).ids for s in sentences]
    agreement = pack.roundtrip_agreement(ids, tokenizer)
    assert agreement == {"documents_checked": 2, "ids_identical": 1.0, "sentences_identical": 1.0,
                         "sentences_seen_per_packed": 1.0}


def test_a_decoded_sentence_reads_as_a_sentence_again():
    assert pack.sentence_text('" anarchist " was the term.') == '"Anarchist " was the term.'
    assert pack.sentence_text("here we rest. \"") == 'Here we rest."'
    assert pack.sentence_text("( their land became part. )") == "(Their land became part.)"
    assert pack.sentence_text("1839 was a year.") == "1839 Was a year."


def test_unpack_writes_the_recipe_files(packed, tmp_path, tokenizer):
    data = pack.unpack(packed, tmp_path / "work", tokenizer)
    lines = [json.loads(line)["text"] for line in data.wiki_train.read_text().splitlines()]
    assert len(lines) == 2 and lines[0].startswith("The children ran down to the river.")
    assert json.loads(data.squad_train.read_text()) == SQUAD
    assert data.heldout_paragraphs == HELDOUT["wiki_paragraphs"] and data.heldout_questions == HELDOUT["squad"]
    assert data.info["wiki"] == {"documents": 2, "sentences": 6, "tokens": int(
        sum(len(tokenizer.backend.encode(s, add_special_tokens=False).ids) for d in DOCUMENTS for s in d))}


def test_a_damaged_file_is_refused(packed, tmp_path, tokenizer):
    blob = (packed / pack.SQUAD).read_bytes()
    (packed / pack.SQUAD).write_bytes(blob[:-2] + b"zz")
    with pytest.raises(ValueError, match="squad_train.json.xz differs from pack.json"):
        pack.unpack(packed, tmp_path / "work", tokenizer)


def test_another_vocabulary_is_refused(packed, tmp_path, tiny_tokenizer):
    with pytest.raises(ValueError, match="another vocabulary"):
        pack.unpack(packed, tmp_path / "work", tiny_tokenizer)


def test_a_symlink_or_a_pipe_is_not_read(packed, tmp_path, tokenizer):
    target = tmp_path / "elsewhere.xz"
    target.write_bytes((packed / pack.WIKI).read_bytes())
    (packed / pack.WIKI).unlink()
    (packed / pack.WIKI).symlink_to(target)
    with pytest.raises(ValueError, match="wiki_ids.xz: cannot be opened as a regular file"):
        pack.unpack(packed, tmp_path / "work", tokenizer)
    (packed / pack.WIKI).unlink()
    os.mkfifo(packed / pack.WIKI)                   # opened without blocking, then refused
    with pytest.raises(ValueError, match="not a regular file"):
        pack.unpack(packed, tmp_path / "work", tokenizer)


def test_a_decompression_bomb_stops_at_its_limit():
    bomb = lzma.compress(b"\0" * 5_000_000)
    with pytest.raises(ValueError, match="more than 1000000 bytes"):
        pack.unxz(bomb, "bomb.xz", limit=1_000_000)
    with pytest.raises(ValueError, match="bomb.xz is damaged"):
        pack.unxz(b"not xz at all", "bomb.xz")


def test_pack_json_that_is_not_a_pack_is_refused(packed, tmp_path, tokenizer):
    (packed / pack.INFO).write_text('{"format": 99}')
    with pytest.raises(ValueError, match="not a format-1 pack"):
        pack.unpack(packed, tmp_path / "work", tokenizer)


def test_ids_outside_the_vocabulary_are_refused(tmp_path, tokenizer):
    ids = np.array([5, 60000, pack.SENTENCE_END, pack.DOCUMENT_END], dtype=np.uint16)
    pack.write_pack(tmp_path / "p", tokenizer, ids, SQUAD, HELDOUT)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        pack.unpack(tmp_path / "p", tmp_path / "work", tokenizer)


def test_fit_prefix_finds_the_largest_prefix_under_the_budget():
    sizes = [0, 10, 25, 40, 70, 100]
    assert fit_prefix(5, lambda n: sizes[n], 50) == (3, 40)
    assert fit_prefix(5, lambda n: sizes[n], 100) == (5, 100)
    assert fit_prefix(5, lambda n: sizes[n], 5) == (0, 0)


def test_squad_file_groups_paragraphs_by_article():
    items = [{"title": "A", "paragraph": {"context": "1", "qas": []}},
             {"title": "B", "paragraph": {"context": "2", "qas": []}},
             {"title": "A", "paragraph": {"context": "3", "qas": []}}]
    assert squad_file(items)["data"] == [{"title": "A", "paragraphs": [{"context": "1", "qas": []},
                                                                      {"context": "3", "qas": []}]},
                                         {"title": "B", "paragraphs": [{"context": "2", "qas": []}]}]
