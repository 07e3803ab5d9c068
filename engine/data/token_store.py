"""A tokenised corpus: every sentence's token ids in one flat array, with two offset indexes.

The layout is the indexed dataset of Megatron-LM and NVIDIA's BERT recipe, kept to what BERT's
pretraining pairs need: ``tokens`` (T,) holds the ids of every sentence back to back,
``sentence_starts`` (S+1,) where each sentence begins in ``tokens`` (the last entry is T) and
``document_starts`` (D+1,) where each document begins in the sentences (the last entry is S; a
document with no tokens keeps its place, with no sentences, so ids match the source's documents).
Consecutive sentences of a document are one contiguous slice of ``tokens``, so a pretraining
segment is two numbers (``engine.data.instance_plan``).

On disk (``TokenStore.open``) the three arrays are raw little-endian files, memory-mapped, so a
corpus of any size costs pages the OS can drop rather than resident memory; ``meta.json`` is
written last and names their types and lengths, which are checked against the files (every
file is untrusted: a damaged store raises ``DamagedStore`` and is rebuilt by the cache).
``TokenStore.from_texts`` (sentences) and ``from_documents`` (ids) build the same arrays in memory for
small texts.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Sequence

import numpy as np

from engine.regular_files import open_regular, read_text
from engine.text.tokenizer import WordPieceTokenizer

FORMAT = 1
TOKENS_FILE, SENTENCES_FILE, DOCUMENTS_FILE, META_FILE = "tokens.bin", "sentences.bin", "documents.bin", "meta.json"
OFFSET_DTYPE = np.dtype("<i8")
CHECK_CHUNK = 1 << 23           # values read at a time when a store is checked (64 MB of offsets)
MAX_META_BYTES = 1 << 20


class DamagedStore(ValueError):
    """A store folder whose files do not agree with its ``meta.json`` (or have none)."""


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned type holding every id of a vocabulary."""
    return np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")


@dataclass(frozen=True)
class TokenStore:
    """The arrays of a tokenised corpus (memory-mapped or in memory) and what made them."""

    tokens: np.ndarray              # (T,) uint16/uint32 token ids, no specials
    sentence_starts: np.ndarray     # (S+1,) int64 offsets into tokens
    document_starts: np.ndarray     # (D+1,) int64 offsets into the sentences
    content_hash: str               # sha256 of the three arrays' bytes
    meta: dict[str, Any]

    @property
    def num_documents(self) -> int:
        return len(self.document_starts) - 1

    @property
    def num_sentences(self) -> int:
        return len(self.sentence_starts) - 1

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    def document_token_counts(self) -> np.ndarray:
        """(D,) tokens in each document."""
        starts = self.sentence_starts[self.document_starts]          # (D+1,) token offset of each document
        return np.diff(starts)

    def sentence_ends(self, document: int) -> list[int]:
        """Token offsets where each sentence of ``document`` ends, preceded by where the first begins."""
        first, last = int(self.document_starts[document]), int(self.document_starts[document + 1])
        return self.sentence_starts[first:last + 1].tolist()

    def token_ids(self, start: int, end: int) -> list[int]:
        """The ids of ``tokens[start:end]`` as a list."""
        return self.tokens[start:end].tolist()

    def documents_token_ids(self) -> list[list[list[int]]]:
        """Every document as lists of sentences of ids (for small stores and tests)."""
        return [[self.token_ids(a, b) for a, b in _pairs(self.sentence_ends(d))] for d in range(self.num_documents)]

    # ------------------------------------------------------------------ building
    @classmethod
    def from_arrays(cls, tokens: np.ndarray, sentence_lengths: np.ndarray, document_sentences: np.ndarray,
                    vocab_size: int, meta: dict[str, Any] | None = None) -> "TokenStore":
        """An in-memory store from what ``encode_documents`` returns (no zero lengths or counts)."""
        tokens = np.asarray(tokens).astype(token_dtype(vocab_size))
        if len(tokens) and int(tokens.max()) >= vocab_size:
            raise ValueError(f"a token id of {int(tokens.max())} is past the vocabulary of {vocab_size}")
        sentences = np.concatenate([[0], np.cumsum(sentence_lengths, dtype=np.int64)]).astype(OFFSET_DTYPE)
        documents = np.concatenate([[0], np.cumsum(document_sentences, dtype=np.int64)]).astype(OFFSET_DTYPE)
        content = _content_hash([hashlib.sha256(array.tobytes()) for array in (tokens, sentences, documents)])
        record = {**(meta or {}), "format": FORMAT, "token_dtype": tokens.dtype.str, "vocab_size": vocab_size,
                  "tokens": len(tokens), "sentences": len(sentences) - 1, "documents": len(documents) - 1,
                  "content_hash": content}
        return cls(tokens, sentences, documents, record["content_hash"], record)

    @classmethod
    def from_documents(cls, documents_token_ids: Iterable[Sequence[Sequence[int]]], vocab_size: int,
                       meta: dict[str, Any] | None = None) -> "TokenStore":
        """An in-memory store of documents given as sentences of ids; empty sentences are dropped, an empty
        document is kept as one of no sentences (so document ids stay those of the input)."""
        tokens: list[int] = []
        lengths: list[int] = []
        per_document: list[int] = []
        for document in documents_token_ids:
            sentences = [sentence for sentence in document if len(sentence) > 0]
            for sentence in sentences:
                tokens.extend(int(t) for t in sentence)
                lengths.append(len(sentence))
            per_document.append(len(sentences))
        return cls.from_arrays(np.asarray(tokens, np.int64), np.asarray(lengths, np.int64),
                               np.asarray(per_document, np.int64), vocab_size, meta)

    @classmethod
    def from_texts(cls, documents: Iterable[Sequence[str]], tokenizer: WordPieceTokenizer,
                   max_sentence_tokens: int | None) -> "TokenStore":
        """An in-memory store of documents of sentences, tokenised (``encode_documents``) with ``tokenizer``."""
        arrays = encode_documents([list(document) for document in documents], tokenizer.backend, max_sentence_tokens)
        return cls.from_arrays(*arrays, tokenizer.vocab_size)

    @classmethod
    def open(cls, folder: str | Path) -> "TokenStore":
        """The memory-mapped store in ``folder``; ``DamagedStore`` says what does not agree."""
        folder = Path(folder)
        meta = _read_meta(folder / META_FILE)
        dtype = np.dtype(meta["token_dtype"])
        arrays = []
        for name, kind, count in ((TOKENS_FILE, dtype, meta["tokens"]),
                                  (SENTENCES_FILE, OFFSET_DTYPE, meta["sentences"] + 1),
                                  (DOCUMENTS_FILE, OFFSET_DTYPE, meta["documents"] + 1)):
            path = folder / name
            try:
                size = path.stat().st_size
            except OSError as exc:
                raise DamagedStore(f"{path.name} cannot be read ({exc.strerror or exc})") from None
            if size != count * kind.itemsize:
                raise DamagedStore(f"{path.name} holds {size:,} bytes, not the {count * kind.itemsize:,} that "
                                   f"meta.json says")
            arrays.append(np.memmap(path, dtype=kind, mode="r", shape=(count,)) if count else np.zeros(0, kind))
        tokens, sentences, documents = arrays
        digests = [hashlib.sha256() for _ in range(3)]
        largest = max((int(chunk.max()) for chunk in _chunks_of(folder / TOKENS_FILE, dtype, digests[0]) if len(chunk)),
                      default=0)
        _check_offsets(folder / SENTENCES_FILE, len(tokens), strict=True, digest=digests[1])
        _check_offsets(folder / DOCUMENTS_FILE, len(sentences) - 1, strict=False, digest=digests[2])
        if largest >= meta["vocab_size"]:
            raise DamagedStore(f"tokens.bin has an id of {largest}, past the vocabulary of {meta['vocab_size']}")
        if _content_hash(digests) != meta["content_hash"]:
            raise DamagedStore("its files differ from what was written (the content hash in meta.json does not match)")
        return cls(tokens, sentences, documents, meta["content_hash"], meta)

    def release_pages(self) -> None:
        """Let go of the memory-mapped pages read so far (they stay in the OS's file cache): a long run over a
        large corpus keeps a flat resident size instead of mapping in every page it ever read."""
        for array in (self.tokens, self.sentence_starts, self.document_starts):
            mapping = getattr(array, "_mmap", None)
            if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
                mapping.madvise(mmap.MADV_DONTNEED)


class StoreWriter:
    """Appends documents to the three files of a store folder, streaming; ``finish`` writes ``meta.json``."""

    def __init__(self, folder: str | Path, vocab_size: int) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.vocab_size, self.dtype = vocab_size, token_dtype(vocab_size)
        self._files: dict[str, BinaryIO] = {name: open(self.folder / name, "wb")
                                             for name in (TOKENS_FILE, SENTENCES_FILE, DOCUMENTS_FILE)}
        self._digests = {name: hashlib.sha256() for name in self._files}
        self.tokens = self.sentences = self.documents = 0
        self._write(SENTENCES_FILE, np.zeros(1, OFFSET_DTYPE))
        self._write(DOCUMENTS_FILE, np.zeros(1, OFFSET_DTYPE))

    def _write(self, name: str, array: np.ndarray) -> None:
        data = array.tobytes()
        self._files[name].write(data)
        self._digests[name].update(data)

    def add(self, tokens: np.ndarray, sentence_lengths: np.ndarray, document_sentences: np.ndarray) -> None:
        """A batch of documents: their ids back to back, each sentence's length, each document's sentence count
        (no zeros in either)."""
        self._write(TOKENS_FILE, tokens.astype(self.dtype, copy=False))
        self._write(SENTENCES_FILE, (self.tokens + np.cumsum(sentence_lengths, dtype=np.int64)).astype(OFFSET_DTYPE))
        self._write(DOCUMENTS_FILE, (self.sentences + np.cumsum(document_sentences, dtype=np.int64))
                    .astype(OFFSET_DTYPE))
        self.tokens += int(len(tokens))
        self.sentences += int(len(sentence_lengths))
        self.documents += int(len(document_sentences))

    def finish(self, meta: dict[str, Any]) -> None:
        """Close the files and write ``meta.json`` (last, so a folder without it is unfinished)."""
        for handle in self._files.values():
            handle.close()
        record = {**meta, "format": FORMAT, "token_dtype": self.dtype.str, "vocab_size": self.vocab_size,
                  "tokens": self.tokens, "sentences": self.sentences, "documents": self.documents,
                  "content_hash": _content_hash(list(self._digests.values()))}
        (self.folder / META_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")

    def abandon(self) -> None:
        for handle in self._files.values():
            handle.close()


def encode_documents(documents: Sequence[Sequence[str]], backend: Any, max_sentence_tokens: int | None,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids back to back, sentence lengths, sentences per document) of documents of sentences, with the
    ``tokenizers`` batch encoder. A sentence longer than ``max_sentence_tokens`` is cut into pieces of that
    size (so text without punctuation still makes full-length instances); empty sentences are dropped, an
    empty document counts zero sentences (document ids stay those of the input)."""
    flat = [sentence for document in documents for sentence in document]
    ids = [item.ids for item in backend.encode_batch_fast(flat, add_special_tokens=False)] if flat else []
    lengths = np.fromiter((len(i) for i in ids), np.int64, len(ids))                      # (n,)
    tokens = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(lengths.sum()))
    step = max_sentence_tokens or max(1, int(lengths.max(initial=1)))
    pieces = -(-lengths // step)                                                           # (n,) 0 when empty
    piece_lengths = np.full(int(pieces.sum()), step, np.int64)
    last = np.cumsum(pieces)[pieces > 0] - 1                                               # each sentence's last piece
    piece_lengths[last] = lengths[pieces > 0] - (pieces[pieces > 0] - 1) * step
    sentence_ends = np.concatenate([[0], np.cumsum(pieces)])                               # (n+1,) in pieces
    document_ends = np.concatenate([[0], np.cumsum([len(d) for d in documents], dtype=np.int64)])
    per_document = sentence_ends[document_ends[1:]] - sentence_ends[document_ends[:-1]]
    return tokens, piece_lengths, per_document.astype(np.int64)


# ---------------------------------------------------------------------------- helpers
def _content_hash(digests: list[Any]) -> str:
    """One hash of the tokens', sentences' and documents' hashes (the same however the files were written)."""
    return hashlib.sha256(b"".join(d.digest() for d in digests)).hexdigest()


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(read_text(path, MAX_META_BYTES))
    except FileNotFoundError:
        raise DamagedStore("meta.json is missing (the store was never finished)") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise DamagedStore(f"meta.json cannot be read ({type(exc).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DamagedStore(f"meta.json is not a format-{FORMAT} store record")
    for name in ("tokens", "sentences", "documents", "vocab_size"):
        if type(meta.get(name)) is not int or meta[name] < 0:
            raise DamagedStore(f"meta.json's {name!r} is not a whole number")
    if meta.get("token_dtype") not in ("<u2", "<u4") or not isinstance(meta.get("content_hash"), str):
        raise DamagedStore("meta.json names no token type or content hash")
    return meta


def _chunks_of(path: Path, dtype: np.dtype, digest: Any = None, count: int = CHECK_CHUNK) -> Iterable[np.ndarray]:
    """The file's values ``count`` at a time, read (not mapped), so checking a large store adds no resident pages;
    ``digest`` (a hashlib object) is fed every byte read. The file must be a regular file (``DamagedStore``)."""
    try:
        handle = open_regular(path)
    except (OSError, ValueError) as exc:
        raise DamagedStore(f"{path.name} cannot be read ({exc})") from None
    with handle:
        while True:
            chunk = np.fromfile(handle, dtype=dtype, count=count)
            if not len(chunk):
                return
            if digest is not None:
                digest.update(chunk.tobytes())
            yield chunk


def _check_offsets(path: Path, end: int, strict: bool, digest: Any = None) -> None:
    """Offsets must start at 0, grow (``strict``: every step; else never fall) and end at ``end``."""
    previous, first, last = None, None, None
    for chunk in _chunks_of(path, OFFSET_DTYPE, digest):
        first = int(chunk[0]) if first is None else first
        steps = np.diff(chunk if previous is None else np.concatenate([[previous], chunk]))
        if bool((steps <= 0).any() if strict else (steps < 0).any()):
            first = -1
            break
        previous = last = int(chunk[-1])
    if first != 0 or last != end:
        raise DamagedStore(f"{path.name} is not a list of increasing offsets from 0 to {end:,}")


def _pairs(ends: list[int]) -> Iterable[tuple[int, int]]:
    return zip(ends[:-1], ends[1:])
