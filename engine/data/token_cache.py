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
so a crash or cancel never leaves a store that looks finished. A damaged store is rebuilt.

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
import logging
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
from engine.data.token_store import META_FILE, DamagedStore, StoreWriter, TokenStore, encode_documents
from engine.text.sentences import split_sentences
from engine.text.tokenizer import WordPieceTokenizer

CACHE_ENV = "BERT_ENGINE_CACHE"
CHUNK_CHARS = 1 << 18               # ~256 KB of text per encoded chunk (a fraction of a second)
REPORT_EVERY_DOCUMENTS = 32         # ... and at most this many documents: a pass reports after every chunk
PARALLEL_FROM_CHARS = 16 << 20      # corpora at least this large are encoded by worker processes
SPLITTER_VERSION = 1                # bump when sentence splitting changes what a store holds
PARTIAL = ".partial-"               # <key>.partial-<pid>-<tag>: a store or vocabulary being written
MAX_DOCUMENTS_UNKNOWN_SIZE = 10**9  # a cached count above this, for a source of unknown size, is damage
logger = logging.getLogger(__name__)

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
    """The corpus's tokens from the cache, tokenising it first when they are not there (or are damaged)."""
    folder = (cache or cache_root()) / "corpora" / _key(
        "store", source.fingerprint(), max_documents, tokenizer_fingerprint(tokenizer), max_sentence_tokens,
        SPLITTER_VERSION)
    sweep_dead_partials(folder.parent)
    if folder.exists() or folder.is_symlink():
        try:
            return TokenStore.open(folder)
        except DamagedStore as exc:          # damaged, changed or never finished: rebuilt, and said so
            logger.warning("the cached tokens of %s in %s are damaged (%s); tokenising the corpus again",
                           source.name, folder, exc)
            _remove(folder)
    partial = folder.with_name(f"{folder.name}{PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with _writing(folder.parent):
            writer = StoreWriter(partial, tokenizer.vocab_size)
        try:
            for arrays in _encoded_chunks(source, tokenizer, max_sentence_tokens, max_documents, num_proc,
                                          on_progress, cache):
                with _writing(folder.parent):
                    writer.add(*arrays)
        finally:
            writer.abandon()
        with _writing(folder.parent):
            writer.finish({"source": source.name, "kind": source.kind, "max_documents": max_documents,
                           "max_sentence_tokens": max_sentence_tokens, "tokenizer": tokenizer_fingerprint(tokenizer)})
            try:
                partial.rename(folder)
            except OSError:                  # another process finished the same store first
                if not (folder / META_FILE).exists():
                    raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
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


def sweep_dead_partials(parent: Path) -> list[Path]:
    """Remove the ``<key>.partial-<pid>-<tag>`` folders of writers that are no longer running on this machine
    (a ``kill -9`` during a build leaves one); returns what was removed."""
    removed = []
    try:
        entries = list(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return removed
    for entry in entries:
        name, _, rest = entry.name.partition(PARTIAL)
        pid = rest.split("-", 1)[0]
        if name and pid.isdigit() and not _alive(int(pid)):
            _remove(entry)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                          # it exists but belongs to someone else
        return True
    return True


def _remove(path: Path) -> None:
    """A folder, file or link removed, whatever it is (a store folder may have been replaced by anything)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


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
    cached = _cached_count(source, max_documents, cache)
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
    cached = _cached_count(source, max_documents, cache)
    if cached is not None:
        return cached[0]
    count = chars = 0
    for chunk in _chunks(source.texts(max_documents), on_progress, corpus_chars(source, max_documents, cache)):
        count += len(chunk)
        chars += sum(text_chars(text) for text in chunk)
    path = _count_path(source, max_documents, cache)
    with _writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"documents": count, "characters": chars}), encoding="utf-8")
        partial.replace(path)
    return count


def _count_path(source: CorpusSource, max_documents: int | None, cache: Path | None) -> Path:
    return (cache or cache_root()) / "counts" / f"{_key('count', source.fingerprint(), max_documents)}.json"


def _cached_count(source: CorpusSource, max_documents: int | None, cache: Path | None,
                  ) -> tuple[int, int | None] | None:
    """(documents, characters or None for an older entry) of a cached count; None when absent or damaged."""
    total = source.total_bytes
    try:
        entry = json.loads(read_text(_count_path(source, max_documents, cache), 4096))
        count, chars = entry["documents"], entry.get("characters")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if type(count) is not int or not 0 <= count <= (total if total is not None else MAX_DOCUMENTS_UNKNOWN_SIZE):
        return None                          # a document holds at least one byte: a larger count is damage
    return count, chars if type(chars) is int and chars >= count else None


def trained_vocabulary(source: CorpusSource, vocab_size: int, min_frequency: int, lowercase: bool,
                       max_documents: int | None = None, held_out: np.ndarray | None = None,
                       cache: Path | None = None, on_progress: Progress | None = None) -> WordPieceTokenizer:
    """A WordPiece vocabulary trained on the corpus's documents but those numbered in ``held_out``; cached."""
    skip = np.zeros(0, np.int64) if held_out is None else np.unique(np.asarray(held_out, np.int64))
    folder = (cache or cache_root()) / "vocabularies" / _key(
        "vocabulary", source.fingerprint(), max_documents, hashlib.sha256(skip.tobytes()).hexdigest(),
        vocab_size, min_frequency, lowercase, SPLITTER_VERSION)
    if (folder / "tokenizer.json").exists():
        try:
            return WordPieceTokenizer.from_file(folder)
        except (OSError, ValueError):
            shutil.rmtree(folder, ignore_errors=True)
    skipped = set(skip.tolist())

    def texts() -> Iterator[str]:       # whole documents: the trainer splits words itself, sentences do not matter
        total = corpus_chars(source, max_documents, cache)
        for chunk_start, chunk in _numbered(_chunks(source.texts(max_documents), on_progress, total)):
            for index, text in enumerate(chunk, start=chunk_start):
                if index not in skipped:
                    yield text if isinstance(text, str) else " ".join(text)

    tokenizer = WordPieceTokenizer.train(texts(), vocab_size=vocab_size, min_frequency=min_frequency,
                                         lowercase=lowercase)
    partial = folder.with_name(f"{folder.name}{PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with _writing(folder.parent):
        tokenizer.save(partial)
    try:
        partial.rename(folder)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return tokenizer


def _numbered(chunks: Iterable[list[DocumentText]]) -> Iterator[tuple[int, list[DocumentText]]]:
    start = 0
    for chunk in chunks:
        yield start, chunk
        start += len(chunk)
