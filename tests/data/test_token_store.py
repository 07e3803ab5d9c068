"""The token store: sentences' ids back to back with two offset indexes, written streaming and
memory-mapped back; every file is checked, so a damaged store is refused with the reason."""
from __future__ import annotations

import json

import numpy as np
import pytest

from engine.data.token_store import DamagedStore, StoreWriter, TokenStore, encode_documents

DOCUMENTS = [[[5, 6, 7], [8]], [], [[9, 10], [11, 12, 13], [14]], [[15]]]


def write(folder, documents=DOCUMENTS, vocab_size=100, chunks=2):
    """Write ``documents`` through ``StoreWriter`` in ``chunks`` batches."""
    writer = StoreWriter(folder, vocab_size)
    for part in np.array_split(np.arange(len(documents)), chunks):
        docs = [documents[i] for i in part]
        lengths = [len(s) for d in docs for s in d]
        tokens = np.asarray([t for d in docs for s in d for t in s], dtype=np.int64)
        writer.add(tokens, np.asarray(lengths, np.int64), np.asarray([len(d) for d in docs], np.int64))
    writer.abandon()
    writer.finish({"source": "test"})
    return folder


def test_a_written_store_reads_back_memory_mapped_as_built_in_memory(tmp_path):
    opened = TokenStore.open(write(tmp_path / "store"))
    in_memory = TokenStore.from_documents(DOCUMENTS, vocab_size=100)
    assert isinstance(opened.tokens, np.memmap) and opened.tokens.dtype == np.dtype("<u2")
    assert opened.documents_token_ids() == in_memory.documents_token_ids() == DOCUMENTS
    assert opened.content_hash == in_memory.content_hash, "the hash does not depend on how the files were written"
    assert opened.document_token_counts().tolist() == [4, 0, 6, 1], "an empty document keeps its place"
    assert opened.sentence_ends(2) == [4, 6, 9, 10]
    assert TokenStore.from_documents(DOCUMENTS, vocab_size=70000).tokens.dtype == np.dtype("<u4")


def test_different_content_has_a_different_hash():
    other = [[[5, 6, 7], [8]], [], [[9, 10], [11, 12, 13], [14]], [[16]]]
    assert TokenStore.from_documents(other, 100).content_hash != TokenStore.from_documents(DOCUMENTS, 100).content_hash


@pytest.mark.parametrize("damage, reason", [
    (lambda f: (f / "meta.json").unlink(), "never finished"),
    (lambda f: (f / "meta.json").write_text("{not json"), "cannot be read"),
    (lambda f: (f / "meta.json").write_text(json.dumps({"format": 1, "tokens": "many"})), "not a whole number"),
    (lambda f: (f / "tokens.bin").write_bytes((f / "tokens.bin").read_bytes()[:-2]), "not the"),
    (lambda f: (f / "sentences.bin").write_bytes(np.asarray([0, 5, 3, 9, 11, 14, 15], "<i8").tobytes()),
     "increasing offsets"),
    (lambda f: (f / "tokens.bin").write_bytes(np.full(11, 99, "<u2").tobytes()), "content hash"),  # other valid ids
    (lambda f: (f / "tokens.bin").write_bytes(np.full(11, 500, "<u2").tobytes()), "past the vocabulary"),
    (lambda f: (f / "documents.bin").unlink(), "cannot be read"),
])
def test_a_damaged_store_is_refused_with_the_reason(tmp_path, damage, reason):
    folder = write(tmp_path / "store")
    damage(folder)
    with pytest.raises(DamagedStore, match=reason):
        TokenStore.open(folder)


def test_encode_documents_cuts_long_sentences_and_keeps_empty_documents(tiny_tokenizer):
    documents = [["the cat sat on the mat with the dog"], [], ["a bird sang.", "the end."]]
    tokens, lengths, per_document = encode_documents(documents, tiny_tokenizer.backend, 4)
    ids = [tiny_tokenizer.backend.encode(s, add_special_tokens=False).ids for d in documents for s in d]
    assert len(ids[0]) == 9, "the first sentence is 9 tokens: cut into 4 + 4 + 1"
    pieces = [len(i[k:k + 4]) for i in ids for k in range(0, len(i), 4)]
    assert lengths.tolist() == pieces and lengths.tolist()[:3] == [4, 4, 1]
    assert per_document.tolist() == [3, 0, len(pieces) - 3]
    assert tokens.tolist() == [t for i in ids for t in i]


def test_a_store_of_texts_holds_the_sentences_cut_to_length(tiny_tokenizer):
    documents = [["the cat " * 40, "", "a dog."], [], ["[unused-only] ☃"]]
    store = TokenStore.from_texts(documents, tiny_tokenizer, max_sentence_tokens=16)
    ids = store.documents_token_ids()
    assert [len(s) for s in ids[0]] == [16] * 5 + [3], "80 tokens cut into 16s, the empty sentence dropped"
    assert ids[1] == [] and len(ids[2]) == 1, "an empty document keeps its place"
    assert ids[0][-1] == tiny_tokenizer.backend.encode("a dog.", add_special_tokens=False).ids
    assert store.meta["vocab_size"] == tiny_tokenizer.vocab_size
