"""Tokenise a corpus once, to disk, and find it again: the token cache.

``prepared_store(source, tokenizer, ...)`` returns the memory-mapped ``TokenStore`` of a
``CorpusSource`` under ``<cache>/corpora/<key>/``, where the key hashes the corpus's fingerprint,
the document limit, the tokenizer's whole definition and the sentence-piece length; a second run on
the same corpus and tokenizer (a new run folder, the app, another process) opens it in
milliseconds. A missing store is built streaming: documents are read in chunks of about
``CHUNK_CHARS``, split into sentences and encoded with the ``tokenizers`` batch encoder (in
``num_proc`` worker processes for a corpus of ``PARALLEL_FROM_CHARS`` or more, known by its size or, when
the size is unknown, only once that much has been read: a spawned worker re-imports the caller's main
module, seconds for the app; results written in order, at most two chunks per worker in flight), appended to a ``.partial`` folder and renamed into place when complete,
so a crash or cancel never leaves a store that looks finished. A damaged entry of any kind (store, count,
vocabulary) is set aside and made again (``engine.data.cache_entries``).

``trained_vocabulary`` streams the same way into ``WordPieceTokenizer.train`` (the ``tokenizers``
trainer counts words; memory grows with the vocabulary of the text, not its size) and caches the
result under ``<cache>/vocabularies/<key>/``. ``count_documents`` reads the corpus once to count
its documents (cached too, with their characters), so the held-out split is known before the vocabulary
is trained. Every pass reports ``on_progress(characters read, total)`` at least every ``REPORT_EVERY_DOCUMENTS``
documents; the total is exact when it is known (text in memory, the files' size, a cached count), else None.

The cache lives in ``$BERT_ENGINE_CACHE``, else ``~/.cache/bert-explorer``.
"""
from __future__ import annotations

import concurrent.futures as futures
import contextlib
import errno
import hashlib
import json
import multiprocessing
import os
import shutil
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from engine.data.corpus_sources import CorpusSource, DocumentText
from engine.regular_files import read_text
from engine.data.cache_entries import (
    PARTIAL, DamagedEntry, read_entry, regular_files, sweep_dead_partials, usable_folder,
)
from engine.data.token_store import (
    DOCUMENTS_FILE, META_FILE, SENTENCES_FILE, TOKENS_FILE, StoreWriter, TokenStore, encode_documents,
)
from engine.text.sentences import split_sentences
from engine.text.tokenizer import WordPieceTokenizer

CACHE_ENV = "BERT_ENGINE_CACHE"
CHUNK_CHARS = 1 << 18               # ~256 KB of text per encoded chunk (a fraction of a second)
REPORT_EVERY_DOCUMENTS = 32         # ... and at most this many documents: a pass reports after every chunk
PARALLEL_FROM_CHARS = 16 << 20      # corpora at least this large are encoded by worker processes
SPLITTER_VERSION = 1                # bump when sentence splitting changes what a store holds
MAX_DOCUMENTS_UNKNOWN_SIZE = 10**9  # a cached count above this, for a source of unknown size, is damage

Progress = Callable[[int, "int | None"], Any]   # (characters read, total or None); False cancels


class CorpusCancelled(Exception):
    """``on_progress`` answered False while the corpus was being read."""


def cache_root() -> Path:
    """The cache folder: ``$BERT_ENGINE_CACHE`` or ``~/.cache/bert-explorer``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "bert-explorer")


def tokenizer_fingerprint(tokenizer: WordPieceTokenizer) -> str:
    """A hash of the tokenizer's whole definition (vocabulary, normalizer, pre-tokenizer)."""
    return hashlib.sha256(tokenizer.backend.to_str().encode()).hexdigest()


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([str(part) for part in parts]).encode()).hexdigest()[:32]


# ---------------------------------------------------------------------------- token stores
def prepared_store(source: CorpusSource, tokenizer: WordPieceTokenizer, max_sentence_tokens: int | None,
                   max_documents: int | None = None, cache: Path | None = None, num_proc: int | None = None,
                   on_progress: Progress | None = None) -> TokenStore:
    """The corpus's tokens from the cache, tokenising it first when they are not there (a damaged store is set
    aside, ``engine.data.cache_entries``; one that cannot be is worked around in memory)."""
    cache = cache or cache_root()
    corpora = usable_folder(cache, "corpora")
    folder = (corpora or cache / "corpora") / _key(
        "store", source.fingerprint(), max_documents, tokenizer_fingerprint(tokenizer), max_sentence_tokens,
        SPLITTER_VERSION)
    sweep_dead_partials(folder.parent)
    again = f"tokenising the corpus again ({source.name})"
    store, writable = read_entry(folder, cache, "folder", _open_store, again) if corpora else (None, False)
    meta = {"source": source.name, "kind": source.kind, "max_documents": max_documents,
            "max_sentence_tokens": max_sentence_tokens, "tokenizer": tokenizer_fingerprint(tokenizer)}
    if store is not None:
        return store
    chunks = _encoded_chunks(source, tokenizer, max_sentence_tokens, max_documents, num_proc, on_progress, cache)
    if not writable:                         # a damaged entry stuck in place: this run keeps its tokens in memory
        parts = list(chunks)
        return TokenStore.from_arrays(*(np.concatenate([part[i] for part in parts] or [np.zeros(0, np.int64)])
                                        for i in range(3)), tokenizer.vocab_size, meta)
    partial = folder.with_name(f"{folder.name}{PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with _writing(folder.parent):
            writer = StoreWriter(partial, tokenizer.vocab_size)
        try:
            for arrays in chunks:
                with _writing(folder.parent):
                    writer.add(*arrays)
        finally:
            writer.abandon()
        with _writing(folder.parent):
            writer.finish(meta)
            try:
                partial.rename(folder)
            except OSError:                  # another process finished the same store first
                if not (folder / META_FILE).exists():
                    raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return TokenStore.open(folder)


def _open_store(folder: Path) -> TokenStore:
    """``TokenStore.open`` of a store folder whose files are regular files (no symlink out of the cache)."""
    regular_files(folder, (META_FILE, TOKENS_FILE, SENTENCES_FILE, DOCUMENTS_FILE))
    return TokenStore.open(folder)


class CacheUnwritable(ValueError):
    """The token cache's folder cannot be written (read-only, full, not a folder, no permission)."""


@contextlib.contextmanager
def _writing(folder: Path) -> Iterator[None]:
    """Turn a failed write into one sentence naming the cache and the way out."""
    try:
        yield
    except OSError as exc:
        reason = {errno.EROFS: "it is on a read-only file system", errno.ENOSPC: "the disk is full",
                  errno.EACCES: "permission denied", errno.ENOTDIR: "a file is in the way of a folder",
                  errno.EEXIST: "a file is in the way of a folder"}.get(exc.errno, exc.strerror or str(exc))
        raise CacheUnwritable(f"the token cache cannot be written in {folder} ({reason}); set {CACHE_ENV} to a "
                              "writable folder") from None


def text_chars(text: DocumentText) -> int:
    """The characters a document counts for in progress reports (a sentence list: each sentence and a space)."""
    return len(text) if isinstance(text, str) else sum(len(s) + 1 for s in text)


def _chunks(texts: Iterable[DocumentText], on_progress: Progress | None, total: int | None,
            ) -> Iterator[list[DocumentText]]:
    """Documents grouped into chunks of about ``CHUNK_CHARS`` and at most ``REPORT_EVERY_DOCUMENTS`` documents,
    reporting the characters read after each chunk was used (counted, learnt from, encoded)."""
    chunk: list[DocumentText] = []
    size = done = 0
    for text in texts:
        chunk.append(text)
        size += text_chars(text)
        if size >= CHUNK_CHARS or len(chunk) >= REPORT_EVERY_DOCUMENTS:
            done += size
            yield chunk
            _report(on_progress, done, total)
            chunk, size = [], 0
    if chunk:
        yield chunk
    _report(on_progress, done + size, total if total is None else max(total, done + size))


def corpus_chars(source: CorpusSource, max_documents: int | None = None, cache: Path | None = None) -> int | None:
    """The characters a pass over the corpus reads (``text_chars``), when known without reading files: text in
    memory (given documents, the built-in corpus), a cached count's, or the files' bytes when all are read."""
    if source.kind in ("documents", "builtin"):
        return sum(text_chars(text) for text in source.texts(max_documents))
    cached = _cached_count(source, max_documents, cache)[0]
    if cached is not None and cached[1] is not None:
        return cached[1]
    return source.total_bytes if source.kind == "files" and max_documents is None else None


def _report(on_progress: Progress | None, done: int, total: int | None) -> None:
    if on_progress is not None and on_progress(done, total) is False:
        raise CorpusCancelled("cancelled while reading the corpus")


def _encoded_chunks(source: CorpusSource, tokenizer: WordPieceTokenizer, max_sentence_tokens: int | None,
                    max_documents: int | None, num_proc: int | None, on_progress: Progress | None,
                    cache: Path | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    total = corpus_chars(source, max_documents, cache)
    chunks = _chunks(source.texts(max_documents), on_progress, total)
    workers = num_proc if num_proc is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or (total is not None and total < PARALLEL_FROM_CHARS):
        for chunk in chunks:
            yield encode_chunk(chunk, tokenizer.backend, max_sentence_tokens)
        return
    if total is None:                   # size unknown: serial until the corpus proves large (no spawn for small text)
        read = 0
        for chunk in chunks:
            yield encode_chunk(chunk, tokenizer.backend, max_sentence_tokens)
            read += sum(text_chars(text) for text in chunk)
            if read >= PARALLEL_FROM_CHARS:
                break
        else:
            return
    context = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                     initargs=(tokenizer.backend.to_str(), max_sentence_tokens)) as pool:
        pending: deque[futures.Future] = deque()
        try:
            for chunk in chunks:
                pending.append(pool.submit(_encode_in_worker, chunk))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for job in pending:
                job.cancel()


def encode_chunk(chunk: Sequence[DocumentText], backend: Any, max_sentence_tokens: int | None,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``encode_documents`` of a chunk, raw texts split into sentences first."""
    documents = [split_sentences(text) if isinstance(text, str) else list(text) for text in chunk]
    return encode_documents(documents, backend, max_sentence_tokens)


_WORKER: dict[str, Any] = {}


def _start_worker(tokenizer_json: str, max_sentence_tokens: int | None) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"       # one thread per worker process: the processes are the parallelism
    from tokenizers import Tokenizer
    _WORKER.update(backend=Tokenizer.from_str(tokenizer_json), max_sentence_tokens=max_sentence_tokens)


def _encode_in_worker(chunk: list[DocumentText]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return encode_chunk(chunk, _WORKER["backend"], _WORKER["max_sentence_tokens"])


# ---------------------------------------------------------------------------- counts and vocabularies
def count_documents(source: CorpusSource, max_documents: int | None = None, cache: Path | None = None,
                    on_progress: Progress | None = None) -> int:
    """How many documents with text the corpus has (the first ``max_documents``); cached, with the characters
    a pass reads (``corpus_chars`` gives later passes that total)."""
    cached, writable = _cached_count(source, max_documents, cache)
    if cached is not None:
        return cached[0]
    count = chars = 0
    for chunk in _chunks(source.texts(max_documents), on_progress, corpus_chars(source, max_documents, cache)):
        count += len(chunk)
        chars += sum(text_chars(text) for text in chunk)
    path = _count_path(source, max_documents, cache)
    if writable:
        with _writing(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps({"documents": count, "characters": chars}), encoding="utf-8")
            partial.replace(path)
    return count


def _count_path(source: CorpusSource, max_documents: int | None, cache: Path | None) -> Path:
    return (cache or cache_root()) / "counts" / f"{_key('count', source.fingerprint(), max_documents)}.json"


def _cached_count(source: CorpusSource, max_documents: int | None, cache: Path | None,
                  ) -> tuple[tuple[int, int | None] | None, bool]:
    """((documents, characters or None for an older entry) or None when absent or set aside, whether a count may
    be written): ``read_entry`` of ``counts/<key>.json``."""
    cache = cache or cache_root()
    if usable_folder(cache, "counts") is None:
        return None, False
    return read_entry(_count_path(source, max_documents, cache), cache, "file",
                      lambda path: _read_count(path, source.total_bytes), f"counting the corpus again ({source.name})")


def _read_count(path: Path, total: int | None) -> tuple[int, int | None]:
    """A count file's numbers; ``DamagedEntry`` (or the reader's error) saying what is wrong with it."""
    try:
        entry = json.loads(read_text(path, 4096))
    except json.JSONDecodeError as exc:
        raise DamagedEntry(f"it is not valid JSON ({exc.msg})") from None
    if not isinstance(entry, dict):
        raise DamagedEntry("it is not a JSON object")
    count, chars = entry.get("documents"), entry.get("characters", 0)
    limit = total if total is not None else MAX_DOCUMENTS_UNKNOWN_SIZE      # a document holds at least one byte
    if type(count) is not int or not 0 <= count <= limit:
        raise DamagedEntry(f"its document count {str(count)[:40]} is not a whole number from 0 to {limit:,}")
    if type(chars) is not int or (chars < count and "characters" in entry):
        raise DamagedEntry(f"its character count {str(chars)[:40]} is not a whole number of at least {count:,}")
    return count, entry.get("characters")


def trained_vocabulary(source: CorpusSource, vocab_size: int, min_frequency: int, lowercase: bool,
                       max_documents: int | None = None, held_out: np.ndarray | None = None,
                       cache: Path | None = None, on_progress: Progress | None = None) -> WordPieceTokenizer:
    """A WordPiece vocabulary trained on the corpus's documents but those numbered in ``held_out``; cached."""
    skip = np.zeros(0, np.int64) if held_out is None else np.unique(np.asarray(held_out, np.int64))
    cache = cache or cache_root()
    vocabularies = usable_folder(cache, "vocabularies")
    folder = (vocabularies or cache / "vocabularies") / _key(
        "vocabulary", source.fingerprint(), max_documents, hashlib.sha256(skip.tobytes()).hexdigest(),
        vocab_size, min_frequency, lowercase, SPLITTER_VERSION)
    found, writable = read_entry(folder, cache, "folder", _open_vocabulary, f"training the vocabulary again "
                                 f"({source.name})") if vocabularies else (None, False)
    if found is not None:
        return found
    skipped = set(skip.tolist())

    def texts() -> Iterator[str]:       # whole documents: the trainer splits words itself, sentences do not matter
        total = corpus_chars(source, max_documents, cache)
        for chunk_start, chunk in _numbered(_chunks(source.texts(max_documents), on_progress, total)):
            for index, text in enumerate(chunk, start=chunk_start):
                if index not in skipped:
                    yield text if isinstance(text, str) else " ".join(text)

    tokenizer = WordPieceTokenizer.train(texts(), vocab_size=vocab_size, min_frequency=min_frequency,
                                         lowercase=lowercase)
    if not writable:
        return tokenizer
    partial = folder.with_name(f"{folder.name}{PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with _writing(folder.parent):
        tokenizer.save(partial)
    try:
        partial.rename(folder)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return tokenizer


def _open_vocabulary(folder: Path) -> WordPieceTokenizer:
    """The cached vocabulary of a folder, whose ``tokenizer.json`` must be a regular file."""
    regular_files(folder, ["tokenizer.json"])
    return WordPieceTokenizer.from_file(folder / "tokenizer.json")


def _numbered(chunks: Iterable[list[DocumentText]]) -> Iterator[tuple[int, list[DocumentText]]]:
    start = 0
    for chunk in chunks:
        yield start, chunk
        start += len(chunk)
