"""The token cache: a corpus is tokenised once (in worker processes when large) and read back from the
cache by every later run; a damaged or unfinished store is rebuilt; a cancelled read leaves nothing."""
from __future__ import annotations

import json

import numpy as np
import pytest

from engine.data import token_cache
from engine.data.token_cache import (
    CorpusCancelled, count_documents, prepared_store, tokenizer_fingerprint, trained_vocabulary,
)
from engine.data.corpus_sources import resolve_corpus
from engine.data.token_store import TokenStore
from engine.text.sentences import split_sentences


def corpus(tmp_path, documents: int = 60):
    path = tmp_path / "corpus.jsonl"
    rows = [f"The cat {i} sat on the mat. A dog ran to the tree. The bird sang {i % 7} times." for i in range(documents)]
    path.write_text("\n".join(json.dumps({"text": r}) for r in rows), encoding="utf-8")
    return resolve_corpus(str(path)), rows


def test_a_corpus_is_tokenised_once_then_read_from_the_cache(tmp_path, tiny_tokenizer):
    source, rows = corpus(tmp_path)
    reads: list[tuple[int, int | None]] = []
    first = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "cache", on_progress=lambda *a: reads.append(a))
    assert reads and reads[-1][0] > 0
    expected = [[tiny_tokenizer.backend.encode(s, add_special_tokens=False).ids for s in split_sentences(r)]
                for r in rows]
    expected = [[ids[k:k + 16] for ids in doc for k in range(0, len(ids), 16)] for doc in expected]
    assert first.documents_token_ids() == expected and isinstance(first.tokens, np.memmap)
    reads.clear()
    again = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "cache", on_progress=lambda *a: reads.append(a))
    assert reads == [] and again.content_hash == first.content_hash, "the second run reads nothing"
    limited = prepared_store(source, tiny_tokenizer, 16, max_documents=5, cache=tmp_path / "cache")
    assert limited.num_documents == 5, "a document limit is its own store"
    assert len(list((tmp_path / "cache" / "corpora").iterdir())) == 2


def test_worker_processes_write_the_same_store(tmp_path, tiny_tokenizer, monkeypatch):
    source, _ = corpus(tmp_path, documents=300)
    serial = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "serial", num_proc=1)
    monkeypatch.setattr(token_cache, "PARALLEL_FROM_CHARS", 0)
    monkeypatch.setattr(token_cache, "CHUNK_CHARS", 2000)          # many chunks, results in order
    parallel = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "parallel", num_proc=2)
    assert parallel.content_hash == serial.content_hash
    assert np.array_equal(parallel.tokens, serial.tokens)


def test_a_damaged_store_is_rebuilt_and_a_cancelled_one_leaves_nothing(tmp_path, tiny_tokenizer):
    source, _ = corpus(tmp_path)
    store = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "cache")
    folder = next((tmp_path / "cache" / "corpora").iterdir())
    (folder / "tokens.bin").write_bytes(b"\x01\x00")
    rebuilt = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "cache")
    assert rebuilt.content_hash == store.content_hash and TokenStore.open(folder).num_tokens == store.num_tokens
    with pytest.raises(CorpusCancelled):
        prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "cold", on_progress=lambda done, total: False)
    assert not any((tmp_path / "cold" / "corpora").iterdir()), "no partial store is left"


def test_the_key_follows_the_tokenizer(tmp_path, tiny_tokenizer):
    source, _ = corpus(tmp_path)
    other = trained_vocabulary(source, 80, 1, True, cache=tmp_path / "cache")
    assert tokenizer_fingerprint(other) != tokenizer_fingerprint(tiny_tokenizer)
    a = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "cache")
    b = prepared_store(source, other, 16, cache=tmp_path / "cache")
    assert a.content_hash != b.content_hash


def test_documents_are_counted_once_and_the_vocabulary_never_sees_held_out_text(tmp_path):
    path = tmp_path / "corpus.txt"
    common = "the cat sat on the mat and the dog ran to the tree."
    blocks = [common] * 5 + ["zyxwv " * 50 + "."] + [common] * 3
    path.write_text("\n\n".join(blocks), encoding="utf-8")
    source = resolve_corpus(str(path))
    assert count_documents(source, cache=tmp_path / "cache") == 9
    calls: list[int] = []
    assert count_documents(source, cache=tmp_path / "cache", on_progress=lambda *a: calls.append(1)) == 9
    assert calls == [], "the count comes from the cache"
    seen = trained_vocabulary(source, 60, 2, True, cache=tmp_path / "cache")
    unseen = trained_vocabulary(source, 60, 2, True, held_out=np.asarray([5]), cache=tmp_path / "cache")
    assert "zyxwv" in seen.get_vocab() and "zyxwv" not in unseen.get_vocab()
    again = trained_vocabulary(source, 60, 2, True, held_out=np.asarray([5]), cache=tmp_path / "cache")
    assert again.get_vocab() == unseen.get_vocab()


def test_text_of_unknown_size_is_encoded_in_process_until_it_proves_large(tmp_path, tiny_tokenizer, monkeypatch):
    """A spawned worker re-imports the caller's main module (seconds for the app): a small corpus whose size is
    not known before reading (given documents, the built-in corpus) must not start any."""
    from engine.data.corpus_sources import documents_source
    pools: list[int] = []
    real_pool = token_cache.futures.ProcessPoolExecutor

    def counted_pool(*args, **kwargs):
        pools.append(1)
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(token_cache.futures, "ProcessPoolExecutor", counted_pool)
    _, rows = corpus(tmp_path, documents=300)
    source = documents_source([split_sentences(r) for r in rows])
    serial = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "small", num_proc=2)
    assert pools == [] and serial.num_documents == 300
    monkeypatch.setattr(token_cache, "PARALLEL_FROM_CHARS", 5000)   # "large": the rest goes to the workers
    monkeypatch.setattr(token_cache, "corpus_chars", lambda *a, **k: None)          # size unknown before reading
    mixed = prepared_store(source, tiny_tokenizer, 16, cache=tmp_path / "large", num_proc=2)
    assert pools == [1] and mixed.content_hash == serial.content_hash


def test_every_pass_reports_at_least_every_few_documents_with_a_known_total(tmp_path, tiny_tokenizer):
    source, rows = corpus(tmp_path, documents=100)
    reads: list[tuple[int, int | None]] = []
    assert count_documents(source, max_documents=70, cache=tmp_path / "cache", on_progress=lambda *a: reads.append(a)) == 70
    assert len(reads) >= 70 // token_cache.REPORT_EVERY_DOCUMENTS
    assert all(total is None for _, total in reads), "files read only in part: the size is not known yet"
    chars = sum(len(r) for r in rows[:70])
    reads.clear()
    prepared_store(source, tiny_tokenizer, 16, max_documents=70, cache=tmp_path / "cache",
                   on_progress=lambda *a: reads.append(a))
    assert len(reads) >= 70 // token_cache.REPORT_EVERY_DOCUMENTS
    assert [done for done, _ in reads] == sorted(done for done, _ in reads) and reads[-1] == (chars, chars), \
        "the count's cached characters are the next passes' total"
