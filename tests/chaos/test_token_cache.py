"""Issue 38, item 3: the token cache verifies what it serves. Changed ids or offsets (still well formed), a
removed meta.json, a pipe in place of a file, an absurd cached document count and the folders of killed writers
are each found, and the corpus is tokenised again (with a warning), never used damaged and never fatal."""
from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from engine.data.cache_entries import sweep_dead_partials
from engine.data.token_cache import CacheUnwritable, count_documents, prepared_store
from engine.data.corpus_sources import resolve_corpus
from engine.data.token_store import META_FILE, SENTENCES_FILE, TOKENS_FILE, DamagedStore, StoreWriter, TokenStore


@pytest.fixture
def built(tmp_path, tiny_tokenizer):
    path = tmp_path / "corpus.jsonl"
    rows = [f"The cat {i} sat on the mat. A dog ran to the tree. The bird sang {i % 7} times." for i in range(80)]
    path.write_text("\n".join(json.dumps({"text": r}) for r in rows), encoding="utf-8")
    source = resolve_corpus(str(path))
    cache = tmp_path / "cache"
    store = prepared_store(source, tiny_tokenizer, 16, cache=cache)
    folder = next((cache / "corpora").iterdir())
    return source, cache, folder, store.documents_token_ids(), store.content_hash


def rebuilt(built, tiny_tokenizer, caplog) -> TokenStore:
    source, cache, _, _, _ = built
    with caplog.at_level(logging.WARNING):
        return prepared_store(source, tiny_tokenizer, 16, cache=cache)


def test_changed_ids_are_found_and_the_store_rebuilt(built, tiny_tokenizer, caplog):
    _, _, folder, documents, content = built
    tokens = np.fromfile(folder / TOKENS_FILE, dtype="<u2")
    positions = np.random.default_rng(0).choice(len(tokens), 100, replace=False)
    tokens[positions] = (tokens[positions] + 1) % 40 + 5                   # other ids, all inside the vocabulary
    tokens.tofile(folder / TOKENS_FILE)
    with pytest.raises(DamagedStore, match="content hash"):
        TokenStore.open(folder)
    store = rebuilt(built, tiny_tokenizer, caplog)
    assert store.documents_token_ids() == documents and store.content_hash == content
    assert "damaged" in caplog.text and "tokenising the corpus again" in caplog.text


def test_a_moved_sentence_offset_is_found(built, tiny_tokenizer, caplog):
    _, _, folder, documents, _ = built
    offsets = np.fromfile(folder / SENTENCES_FILE, dtype="<i8")
    offsets[5] += 1                                                         # still increasing: only the hash sees it
    offsets.tofile(folder / SENTENCES_FILE)
    with pytest.raises(DamagedStore, match="content hash"):
        TokenStore.open(folder)
    assert rebuilt(built, tiny_tokenizer, caplog).documents_token_ids() == documents


def test_a_removed_meta_json_is_rebuilt_not_fatal(built, tiny_tokenizer, caplog):
    _, _, folder, documents, _ = built
    (folder / META_FILE).unlink()
    assert rebuilt(built, tiny_tokenizer, caplog).documents_token_ids() == documents
    assert rebuilt(built, tiny_tokenizer, caplog).documents_token_ids() == documents   # and stays good


def test_a_pipe_in_place_of_tokens_bin_does_not_hang(built, tiny_tokenizer, caplog):
    _, _, folder, documents, _ = built
    size = (folder / TOKENS_FILE).stat().st_size
    (folder / TOKENS_FILE).unlink()
    os.mkfifo(folder / TOKENS_FILE)
    with pytest.raises(DamagedStore):
        TokenStore.open(folder)
    assert size and rebuilt(built, tiny_tokenizer, caplog).documents_token_ids() == documents


def test_an_absurd_cached_count_is_counted_again(built, tmp_path):
    source, cache, _, documents, _ = built
    assert count_documents(source, cache=cache) == len(documents)
    counts = next((cache / "counts").iterdir())
    counts.write_text(json.dumps({"documents": 10**12}))
    assert count_documents(source, cache=cache) == len(documents)
    counts.write_text("[" * 50_000)
    assert count_documents(source, cache=cache) == len(documents)


def test_the_folders_of_killed_writers_are_swept(built, tiny_tokenizer):
    source, cache, folder, _, _ = built
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = folder.with_name(f"{folder.name}.partial-{dead.stdout.strip()}-abcd1234")
    mine = folder.with_name(f"{folder.name}.partial-{os.getpid()}-abcd1234")
    for path in (leftover, mine):
        path.mkdir()
        (path / TOKENS_FILE).write_bytes(b"\0" * 10)
    assert sweep_dead_partials(folder.parent) == [leftover]
    assert not leftover.exists() and mine.exists(), "a live writer's folder is left alone"
    prepared_store(source, tiny_tokenizer, 16, cache=cache)                 # every build sweeps first
    assert mine.exists()


def test_a_cache_that_is_a_file_says_so(tmp_path, tiny_tokenizer):
    path = tmp_path / "corpus.txt"
    path.write_text("The cat sat. The dog ran.\n\nA bird sang.\n")
    (tmp_path / "cache").write_text("not a folder")
    with pytest.raises(CacheUnwritable, match="the token cache cannot be written in .*cache.*BERT_ENGINE_CACHE"):
        prepared_store(resolve_corpus(str(path)), tiny_tokenizer, 16, cache=tmp_path / "cache")
    with pytest.raises(CacheUnwritable, match="a file is in the way"):
        count_documents(resolve_corpus(str(path)), cache=tmp_path / "cache")


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "read-only file system")])
def test_a_full_or_read_only_disk_is_one_sentence(tmp_path, tiny_tokenizer, monkeypatch, code, reason):
    path = tmp_path / "corpus.txt"
    path.write_text("The cat sat. The dog ran.\n\nA bird sang.\n")

    def fail(self, *arrays):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(StoreWriter, "add", fail)
    with pytest.raises(CacheUnwritable, match=reason):
        prepared_store(resolve_corpus(str(path)), tiny_tokenizer, 16, cache=tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache" / "corpora").iterdir()], "no partial folder is left behind"
