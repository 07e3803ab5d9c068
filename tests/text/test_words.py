"""Words and pieces by the vocabulary's kind (``engine.text.words``), against ``transformers``' fast tokenizers of
each family (``support.family_tokenizers``): which pieces start a word (whitespace words for byte-level BPE and
SentencePiece, the pre-tokenizer's words for WordPiece), and pre-split words encoded as ``run_ner.py`` encodes
them (RoBERTa with ``add_prefix_space=True``)."""
from __future__ import annotations

import bisect
import os
import re
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import transformers

from engine.text.tokenizer import WordPieceTokenizer
from engine.text.words import continues_word, marks_word_starts, pre_split_encoder
from support.family_tokenizers import build

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("roberta", "xlmr", "albert", "distilbert")
TEXT = "Tokenization splits unbelievable stories, and Paris is famous for its museums."


@pytest.fixture(scope="module", params=KINDS)
def folder(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, build(request.param, tmp_path_factory.mktemp(request.param))


def whitespace_word_starts(text: str, offsets: list[tuple[int, int]]) -> list[bool]:
    """For each piece (by its character offsets), whether it is the first piece of a whitespace-delimited word."""
    word_starts = [match.start() for match in re.finditer(r"\S+", text)]
    starts, seen = [], set()
    for begin, end in offsets:
        while begin < end and text[begin].isspace():    # a piece holding the space before its word
            begin += 1
        word = bisect.bisect_right(word_starts, begin) - 1
        starts.append(word not in seen)
        seen.add(word)
    return starts


def test_each_kind_marks_word_starts_as_its_model_reads_them(folder):
    kind, path = folder
    ours = WordPieceTokenizer.from_file(path)
    theirs = transformers.AutoTokenizer.from_pretrained(path)
    encoded = theirs(TEXT, add_special_tokens=False, return_offsets_mapping=True)
    continues = continues_word(ours)
    found = [not continues[i] for i in encoded["input_ids"]]
    if kind == "distilbert":       # WordPiece: a word is what the pre-tokenizer splits (punctuation one of its own)
        words = encoded.word_ids()
        expected = [i == 0 or words[i] != words[i - 1] for i in range(len(words))]
        assert not marks_word_starts(ours)
    else:                          # byte-level BPE and SentencePiece: what lies between two spaces
        expected = whitespace_word_starts(TEXT, encoded["offset_mapping"])
        expected[0] = found[0]     # the text's first piece: byte-level writes no space before it (a special starts it)
        assert marks_word_starts(ours)
    assert found == expected, list(zip(theirs.convert_ids_to_tokens(encoded["input_ids"]), found, expected))
    assert sum(expected) < len(expected)        # some word has several pieces
    assert not any(continues[i] for i in ours.special_ids())


def test_the_bundled_wordpiece_vocabulary_keeps_its_rule():
    tokenizer = WordPieceTokenizer.from_file(ROOT / "assets" / "tokenizer")
    assert continues_word(tokenizer) == [piece.startswith("##") for piece, _ in
                                         sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]


def test_pre_split_words_read_as_run_ner_reads_them(folder):
    kind, path = folder
    words = TEXT.rstrip(".").split() + ["."]
    theirs = transformers.AutoTokenizer.from_pretrained(path, **({"add_prefix_space": True} if kind == "roberta"
                                                                    else {}))
    expected = theirs(words, is_split_into_words=True)
    ours = pre_split_encoder(WordPieceTokenizer.from_file(path)).encode(words, is_pretokenized=True)
    assert ours.ids == expected["input_ids"] and ours.word_ids == expected.word_ids()
    if kind == "roberta":          # every word, the first too, has the space a sentence gives it
        assert all(piece.startswith("Ġ") for piece, word, previous in zip(ours.tokens[1:], ours.word_ids[1:],
                                                                           ours.word_ids[:-1])
                   if word is not None and word != previous)
