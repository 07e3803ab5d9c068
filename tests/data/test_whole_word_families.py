"""Whole-word masking with a RoBERTa (byte-level BPE) and an XLM-R (SentencePiece) tokenizer: pretraining batches
(``PretrainingDataset``, the path of pretraining and of ``qa_mlm``'s masked-LM term) choose every piece of a word
together, a word being what lies between two spaces (``transformers``' offsets of the same text say where), and a
sentence's first word is a word of its own although byte-level BPE writes it without its space."""
from __future__ import annotations

import bisect
import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import transformers

from engine.data.masking import IGNORE_INDEX
from engine.data.pretraining import PretrainingDataset
from engine.data.token_store import TokenStore
from engine.text.tokenizer import WordPieceTokenizer
from support.family_tokenizers import CORPUS, build

SEQ = 160                # longer than any line's pieces: an instance is one whole sentence


@pytest.fixture(scope="module", params=["roberta", "xlmr"])
def tokenizers(request, tmp_path_factory):
    folder = build(request.param, tmp_path_factory.mktemp(request.param))
    return WordPieceTokenizer.from_file(folder), transformers.AutoTokenizer.from_pretrained(folder)


def reference_words(theirs, text: str) -> tuple[tuple[int, ...], list[int]]:
    """``text``'s ids without specials (transformers' tokenizer) and each piece's whitespace word."""
    encoded = theirs(text, add_special_tokens=False, return_offsets_mapping=True)
    starts = [match.start() for match in re.finditer(r"\S+", text)]
    words = []
    for begin, end in encoded["offset_mapping"]:
        while begin < end and text[begin].isspace():
            begin += 1
        words.append(bisect.bisect_right(starts, begin) - 1)
    return tuple(encoded["input_ids"]), words


def test_every_piece_of_a_word_is_chosen_together(tokenizers):
    ours, theirs = tokenizers
    reference = dict(reference_words(theirs, line) for line in CORPUS)        # one sentence per document
    store = TokenStore.from_texts([[line] for line in CORPUS], ours, SEQ - 2)
    multi_piece_words_chosen = 0
    for seed in range(4):
        data = PretrainingDataset(store, ours, SEQ, batch_size=4, mlm_probability=0.3, short_seq_prob=0.0, nsp=False,
                                  whole_word=True, seed=seed)
        for batch in data.epoch_batches(0):
            chosen = batch.labels != IGNORE_INDEX                                   # (B, S)
            for r in range(batch.labels.shape[0]):
                length = int(batch.attention_mask[r].sum())
                original = torch.where(chosen[r], batch.labels[r], batch.input_ids[r])[1:length - 1]
                words = torch.tensor(reference[tuple(original.tolist())])         # (n,) the row is a whole line
                picked = chosen[r, 1:length - 1]
                for word in words.unique():
                    state = picked[words == word]
                    assert state.all() or not state.any(), "a word was only partly chosen"
                    multi_piece_words_chosen += bool(state.all()) and len(state) > 1
    assert multi_piece_words_chosen > 20


def test_a_sentence_starts_a_word_of_its_own(tokenizers):
    """Two sentences of one document share an instance; the second's first word (byte-level: no space mark) is
    chosen apart from the first sentence's last word."""
    ours, theirs = tokenizers
    first, second = "The dog ran home.", "Tokenization splits running text."
    store = TokenStore.from_texts([[first, second], [first, second]], ours, SEQ - 2)
    first_ids, _ = reference_words(theirs, first)
    second_ids, second_words = reference_words(theirs, second)
    last, start = len(first_ids), 1 + len(first_ids)                     # positions after the first special token
    apart = together = 0
    for seed in range(200):
        data = PretrainingDataset(store, ours, SEQ, batch_size=2, mlm_probability=0.5, short_seq_prob=0.0, nsp=False,
                                  whole_word=True, seed=seed)
        batch = data.batch(0, 0)
        chosen = batch.labels[0] != IGNORE_INDEX                          # (S,)
        original = torch.where(chosen, batch.labels[0], batch.input_ids[0])
        assert original[1:1 + len(first_ids) + len(second_ids)].tolist() == [*first_ids, *second_ids]
        first_word = [start + i for i, w in enumerate(second_words) if w == 0]
        assert len(set(chosen[first_word].tolist())) == 1                 # "Tokenization": all its pieces or none
        apart += bool(chosen[last] != chosen[start])
        together += bool(chosen[last] and chosen[start])
    assert apart > 50 and together < apart
