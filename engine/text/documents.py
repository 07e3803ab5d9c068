"""Documents: text read into lists of sentences, for pretraining, and their held-out split.

A *document* is a list of sentences (``Document = list[str]``), the unit the original BERT recipe
draws next-sentence pairs from: segment A and an ``IsNext`` segment B come from consecutive sentences
of one document, a ``NotNext`` B from another document.

``read_documents(source, filename)`` reads an uploaded ``.txt``/``.md`` file (one document per
blank-line-separated block) or ``.jsonl`` (one document per line: ``{"text": ...}`` or a JSON string),
at most ``MAX_UPLOAD_BYTES``, UTF-8; ``parse_documents`` does the same for text already read, and
``jsonl_text`` reads one ``.jsonl`` line (the corpus files of ``engine.data.corpus_sources`` too).
Sentences come from ``engine.text.sentences.split_sentences``.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Iterable

from engine.text.sentences import split_sentences

Document = list[str]

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
TEXT_EXTENSIONS = (".txt", ".md")
JSONL_EXTENSIONS = (".jsonl",)

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def documents_from_texts(texts: Iterable[str]) -> list[Document]:
    """One document per text, split into sentences; empty ones dropped."""
    documents = [split_sentences(text) for text in texts]
    return [doc for doc in documents if doc]



def read_documents(source: str | Path | bytes, filename: str | None = None,
                   max_bytes: int | None = None) -> list[Document]:
    """Documents from an uploaded ``.txt``/``.md``/``.jsonl`` file (a path or its bytes).

    ``.txt``/``.md``: one document per blank-line-separated block. ``.jsonl``: one document
    per non-blank line, each ``{"text": "..."}`` or a JSON string. ``filename`` gives the
    extension (required for bytes; defaults to the path's name). Raises ValueError with a
    readable message for an unknown extension, a file over ``max_bytes`` (``MAX_UPLOAD_BYTES``
    by default), binary content (NUL bytes), invalid UTF-8, empty input, or JSON lines without text.
    """
    text, name = read_text(source, filename, max_bytes)
    return parse_documents(text, text_format(name), name)


def read_text(source: str | Path | bytes, filename: str | None = None,
              max_bytes: int | None = None) -> tuple[str, str]:
    """(the decoded text, its name) of an upload, after the extension, size and UTF-8 checks of
    ``read_documents``."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        if filename is None:
            raise ValueError("a filename (for its extension: .txt, .md or .jsonl) is needed with raw bytes")
        name = filename
        _check_extension(name)
        data = bytes(source)
        _check_size(len(data), name, max_bytes)
    elif isinstance(source, (str, Path)):
        path = Path(source)
        name = filename or path.name
        _check_extension(name)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        _check_size(path.stat().st_size, name, max_bytes)
        data = path.read_bytes()
    else:
        raise TypeError(f"source must be a path or bytes, got {type(source).__name__}")
    return _decode(data, name), name


def text_format(name: str) -> str:
    """``"jsonl"`` for a ``.jsonl`` name, else ``"txt"`` (blank-line-separated documents)."""
    return "jsonl" if Path(name).suffix.lower() in JSONL_EXTENSIONS else "txt"


def parse_documents(text: str, fmt: str = "txt", name: str = "the text") -> list[Document]:
    """Documents of already-decoded ``text``: ``fmt`` ``"txt"`` (one per blank-line-separated block)
    or ``"jsonl"`` (one per line, ``{"text": "..."}`` or a JSON string); ValueError when none has text."""
    if fmt == "jsonl":
        documents = documents_from_texts(_jsonl_texts(text, name))
    elif fmt == "txt":
        documents = documents_from_texts(_BLANK_LINE.split(text.replace("\r\n", "\n").replace("\r", "\n")))
    else:
        raise ValueError(f"unknown text format {fmt!r}; use txt or jsonl")
    if not documents:
        raise ValueError(f"{name} contains no text (only whitespace or empty records)")
    return documents


def _check_extension(name: str) -> None:
    suffix = Path(name).suffix.lower()
    if suffix not in TEXT_EXTENSIONS + JSONL_EXTENSIONS:
        allowed = ", ".join(TEXT_EXTENSIONS + JSONL_EXTENSIONS)
        raise ValueError(f"{name}: unsupported file type {suffix or '(no extension)'!r}; use {allowed}")


def _check_size(size: int, name: str, max_bytes: int | None = None) -> None:
    limit = MAX_UPLOAD_BYTES if max_bytes is None else max_bytes
    if size == 0:
        raise ValueError(f"{name} is empty")
    if size > limit:
        raise ValueError(f"{name} is {size / 2**20:.1f} MiB; the limit is {limit / 2**20:.0f} MiB")


def _decode(data: bytes, name: str) -> str:
    """UTF-8 (a BOM is allowed) or a ValueError saying why the bytes are not text."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ValueError(f"{name} looks like a binary file (it contains a NUL byte at offset {nul}); "
                         "upload plain UTF-8 text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not valid UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "save it as UTF-8") from None
    if not text.strip():
        raise ValueError(f"{name} is empty (only whitespace)")
    return text


def _jsonl_texts(text: str, name: str) -> list[str]:
    texts = [jsonl_text(line, number, name) for number, line in enumerate(text.splitlines(), start=1)]
    return [text for text in texts if text is not None]


def jsonl_text(line: str, number: int, name: str) -> str | None:
    """The text of one ``.jsonl`` line (``{"text": "..."}`` or a JSON string); None for a blank line;
    ValueError naming ``name`` and line ``number`` otherwise."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} line {number} is not valid JSON: {exc.msg} (column {exc.colno}); "
                         'each line must be one JSON object such as {"text": "..."}') from None
    except RecursionError:
        raise ValueError(f"{name} line {number} nests JSON too deeply to read; "
                         'each line must be one JSON object such as {"text": "..."}') from None
    if isinstance(record, dict):
        if "text" not in record:
            keys = ", ".join(json.dumps(str(key)) for key in list(record)[:5]) or "none"
            raise ValueError(f'{name} line {number} has no text: it has no "text" field (its fields: {keys}); '
                             'each line must be {"text": "..."} or a JSON string')
        record = record["text"]
        if not isinstance(record, str):
            raise ValueError(f'{name} line {number} has no text: its "text" field is {_json_kind(record)}, '
                             "not a string")
    if not isinstance(record, str):
        raise ValueError(f'{name} line {number} has no text: it is {_json_kind(record)}; '
                         'each line must be {"text": "..."} or a JSON string')
    return record


def _json_kind(value: object) -> str:
    """``a number``, ``a list``, ... : what a JSON value is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a true/false value"
    return {int: "a number", float: "a number", list: "a list", dict: "an object", str: "a string"}.get(
        type(value), type(value).__name__)


def train_eval_split(documents: list[Document], eval_fraction: float = 0.05,
                     rng: random.Random | None = None) -> tuple[list[Document], list[Document]]:
    """Shuffle a copy of the documents and hold out ``eval_fraction`` of them (at least one
    for evaluation and at least two for training when there are enough)."""
    if not 0.0 <= eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must be in [0, 1), got {eval_fraction}")
    order = list(documents)
    (rng or random.Random(0)).shuffle(order)
    n_eval = round(len(order) * eval_fraction)
    if eval_fraction > 0 and len(order) >= 3:
        n_eval = min(max(1, n_eval), len(order) - 2)
    return order[n_eval:], order[:n_eval]
