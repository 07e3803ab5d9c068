"""The data pack a GPU session carries: Wikipedia as xz-compressed token ids, SQuAD as xz-compressed JSON.

Why ids: measured on the training split (``scripts/gpu_data_pack.py`` prints it on every build), xz of the
WordPiece ids as little-endian uint16 holds about 0.9 tokens per byte against about 0.75 for xz of the same
text, so the ~8 MB the device's 64 MiB tree leaves carry ~20% more training text as ids.

Layout of a pack folder (``.gpu/pack/``, ignored by git, named in the device call's ``carry``):

* ``wiki_ids.xz``: uint16 ids of the training articles' sentences, each sentence followed by ``SENTENCE_END``
  (0, ``[PAD]``) and each article by ``DOCUMENT_END`` (1, ``[unused0]``);
* ``squad_train.json.xz``: a SQuAD v1.1 file of training paragraphs (whole paragraphs with their questions);
* ``heldout.json.xz``: ``{"wiki_paragraphs": [...], "squad": [{"id", "question", "context", "answers"}]}``,
  a fixed sample of the held-out articles (never in the two training files) that the session scores;
* ``pack.json``: the format, every file's size and SHA-256, the tokenizer's fingerprint, counts.

On the device ``unpack`` checks every file against ``pack.json`` (regular files, size caps, hashes), decodes
the ids to one JSONL document per article (each sentence's first letter upper-cased, so the engine's sentence
splitter finds the same sentences) and writes the SQuAD file, the inputs of the ``qa_mlm`` recipe.
"""
from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from engine.text.tokenizer import WordPieceTokenizer

FORMAT = 1
SENTENCE_END, DOCUMENT_END = 0, 1
WIKI, SQUAD, HELDOUT, INFO = "wiki_ids.xz", "squad_train.json.xz", "heldout.json.xz", "pack.json"
LEADING = re.compile(r"""^((?:["'\u201c\u2018(\[]\s*)+)""")      # opening quotes / brackets, spaced
TRAILING = re.compile(r"""[.!?]+(?:\s*["'\u201d\u2019)\]])+\s*$""")  # the end's punctuation, spaced closers
XZ_PRESET = 9 | lzma.PRESET_EXTREME
MAX_FILE_BYTES = 32 * 2**20        # any one packed file; the whole tree travels in 64 MiB
MAX_DECODED_BYTES = 512 * 2**20    # what one packed file may grow to when decompressed
MAX_INFO_BYTES = 1 * 2**20


def tokenizer_fingerprint(tokenizer: WordPieceTokenizer) -> str:
    """SHA-256 of the vocabulary (token and id, in id order): ids mean the same words only under it."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()


def encode_documents(documents: Iterable[Sequence[str]], tokenizer: WordPieceTokenizer) -> np.ndarray:
    """Documents (lists of sentences) as one uint16 id stream with the two separators."""
    if tokenizer.vocab_size > 2**16:
        raise ValueError(f"a vocabulary of {tokenizer.vocab_size} ids does not fit uint16")
    parts: list[np.ndarray] = []
    for sentences in documents:
        encodings = tokenizer.backend.encode_batch(list(sentences), add_special_tokens=False)
        for encoding in encodings:
            if encoding.ids:
                parts.append(np.asarray(encoding.ids + [SENTENCE_END], dtype=np.uint16))
        parts.append(np.asarray([DOCUMENT_END], dtype=np.uint16))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)


def split_stream(ids: np.ndarray) -> Iterator[list[np.ndarray]]:
    """The documents of an id stream, each a list of sentence id arrays (separators removed)."""
    document_ends = np.flatnonzero(ids == DOCUMENT_END)
    start = 0
    for end in document_ends:
        document = ids[start:end]
        cuts = np.flatnonzero(document == SENTENCE_END)
        sentences, begin = [], 0
        for cut in cuts:
            if cut > begin:
                sentences.append(document[begin:cut])
            begin = cut + 1
        if begin < len(document):
            sentences.append(document[begin:])
        if sentences:
            yield sentences
        start = end + 1


def sentence_text(decoded: str) -> str:
    """A decoded (lower-case, spaced) sentence made to read as a sentence start and end again, so the engine's
    splitter (``engine.text.sentences.split_sentences``) cuts where the original text was cut: the first letter
    upper-cased, no space after leading opening quotes or brackets, none between the final ``. ! ?`` and the
    closing quotes or brackets after it. Spaces around punctuation never change BERT's ids."""
    text = LEADING.sub(lambda m: m.group(1).replace(" ", ""), decoded.strip(), count=1)
    text = TRAILING.sub(lambda m: m.group(0).replace(" ", ""), text, count=1)
    for index, char in enumerate(text):
        if char.isalpha():
            return text[:index] + char.upper() + text[index + 1:]
    return text


def decode_documents(ids: np.ndarray, tokenizer: WordPieceTokenizer) -> Iterator[str]:
    """Each document of the stream as text: its sentences decoded, capitalised and joined by spaces."""
    for sentences in split_stream(ids):
        texts = tokenizer.backend.decode_batch([s.tolist() for s in sentences], skip_special_tokens=False)
        yield " ".join(sentence_text(t) for t in texts)


def roundtrip_agreement(ids: np.ndarray, tokenizer: WordPieceTokenizer, max_documents: int = 300,
                        ) -> dict[str, float]:
    """How exactly the engine sees what was packed: decode documents, split them with the engine's sentence
    splitter, encode again. Returns the share of documents whose ids come back identical (sentence cuts
    aside), the share whose sentences all come back one for one, and the engine's sentences per packed one."""
    from engine.text.sentences import split_sentences

    same_ids = same_sentences = total = packed = seen = 0
    for sentences, text in zip(split_stream(ids), decode_documents(ids, tokenizer)):
        again = [e.ids for e in tokenizer.backend.encode_batch(split_sentences(text), add_special_tokens=False)]
        same_ids += [i for s in again for i in s] == [int(i) for s in sentences for i in s]
        same_sentences += len(again) == len(sentences)
        packed, seen, total = packed + len(sentences), seen + len(again), total + 1
        if total >= max_documents:
            break
    return {"documents_checked": total, "ids_identical": same_ids / max(total, 1),
            "sentences_identical": same_sentences / max(total, 1), "sentences_seen_per_packed": seen / max(packed, 1)}


def xz(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, preset=XZ_PRESET)


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def write_pack(out: Path, tokenizer: WordPieceTokenizer, wiki_ids: np.ndarray, squad: dict[str, Any],
               heldout: dict[str, Any], details: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the four files of a pack into ``out`` (created); returns ``pack.json``'s content."""
    out.mkdir(parents=True, exist_ok=True)
    blobs = {WIKI: xz(wiki_ids.astype("<u2").tobytes()), SQUAD: xz(json_bytes(squad)), HELDOUT: xz(json_bytes(heldout))}
    files = {}
    for name, blob in blobs.items():
        (out / name).write_bytes(blob)
        files[name] = {"bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
    info = {"format": FORMAT, "tokenizer_sha256": tokenizer_fingerprint(tokenizer),
            "separators": {"sentence": SENTENCE_END, "document": DOCUMENT_END}, "files": files,
            "wiki": {"documents": int((wiki_ids == DOCUMENT_END).sum()),
                     "sentences": int((wiki_ids == SENTENCE_END).sum()),
                     "tokens": int(len(wiki_ids) - (wiki_ids <= DOCUMENT_END).sum())},
            "squad": {"paragraphs": sum(len(a["paragraphs"]) for a in squad["data"]),
                      "questions": sum(len(p["qas"]) for a in squad["data"] for p in a["paragraphs"])},
            "heldout": {"wiki_paragraphs": len(heldout["wiki_paragraphs"]), "squad_questions": len(heldout["squad"])},
            "total_bytes": sum(f["bytes"] for f in files.values()), **(details or {})}
    (out / INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


# ---------------------------------------------------------------------------------------------- the device side
@dataclass
class UnpackedPack:
    """What the training stage reads: the two recipe files, the held-out sample, ``pack.json``."""

    wiki_train: Path                         # JSONL, one {"text": ...} per article
    squad_train: Path                        # SQuAD v1.1 JSON
    heldout_paragraphs: list[str]
    heldout_questions: list[dict[str, Any]]  # {"id", "question", "context", "answers"}
    info: dict[str, Any]


def read_checked(path: Path, limit: int) -> bytes:
    """A regular file's bytes (no symlink, no device or pipe; opened without blocking), at most ``limit``."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        raise ValueError(f"{path.name}: cannot be opened as a regular file ({exc.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data


def unxz(blob: bytes, name: str, limit: int = MAX_DECODED_BYTES) -> bytes:
    """Decompress at most ``limit`` bytes; more, or damaged data, is a ValueError naming the file."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        data = decompressor.decompress(blob, max_length=limit + 1)
    except lzma.LZMAError as exc:
        raise ValueError(f"{name} is damaged ({exc})") from None
    if len(data) > limit or not decompressor.eof:
        raise ValueError(f"{name} decompresses to more than {limit} bytes or is cut short")
    return data


def read_pack(folder: Path, tokenizer: WordPieceTokenizer) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``pack.json`` and each file's decompressed bytes, checked against it and against ``tokenizer``."""
    try:
        info = json.loads(read_checked(folder / INFO, MAX_INFO_BYTES))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{INFO} is not JSON ({exc})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT or not isinstance(info.get("files"), dict):
        raise ValueError(f"{INFO} is not a format-{FORMAT} pack description")
    if info.get("tokenizer_sha256") != tokenizer_fingerprint(tokenizer):
        raise ValueError("the pack's ids were made with another vocabulary than the start model's")
    decoded = {}
    for name in (WIKI, SQUAD, HELDOUT):
        entry = info["files"].get(name)
        if not isinstance(entry, dict):
            raise ValueError(f"{INFO} does not list {name}")
        blob = read_checked(folder / name, MAX_FILE_BYTES)
        if len(blob) != entry.get("bytes") or hashlib.sha256(blob).hexdigest() != entry.get("sha256"):
            raise ValueError(f"{name} differs from {INFO} (size or SHA-256): the pack is damaged; build it again")
        decoded[name] = unxz(blob, name)
    return info, decoded


def unpack(folder: str | Path, work: str | Path, tokenizer: WordPieceTokenizer) -> UnpackedPack:
    """Check the pack in ``folder`` and write the recipe's files into ``work``."""
    folder, work = Path(folder), Path(work)
    info, decoded = read_pack(folder, tokenizer)
    work.mkdir(parents=True, exist_ok=True)
    ids = np.frombuffer(decoded[WIKI], dtype="<u2")
    if len(ids) and int(ids.max()) >= tokenizer.vocab_size:
        raise ValueError(f"{WIKI} holds ids outside the vocabulary")
    wiki = work / "wiki_train.jsonl"
    with wiki.open("w", encoding="utf-8") as handle:
        for text in decode_documents(ids, tokenizer):
            handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    squad = work / "squad_train.json"
    squad.write_bytes(decoded[SQUAD])
    try:
        heldout = json.loads(decoded[HELDOUT])
        paragraphs, questions = list(heldout["wiki_paragraphs"]), list(heldout["squad"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{HELDOUT} does not hold the held-out sample ({exc})") from None
    return UnpackedPack(wiki, squad, [str(p) for p in paragraphs], questions, info)
