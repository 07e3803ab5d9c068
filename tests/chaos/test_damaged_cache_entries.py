"""Every entry of the token cache is verified and heals itself. One damaged or wrong-typed entry (a count that is a
folder, a pipe, a symlink out of the cache, invalid JSON or wrong values; a store file that is a folder or of the
wrong size; a meta.json that is a folder; a vocabulary that does not load; a subfolder that is a file) is set aside
next to itself as ``<name>.damaged-<time>`` with a note, a warning names it and what was wrong, and it is made
again; the corpus keeps working. An entry that cannot be set aside is worked around without the cache. Only the
cache folder itself being unwritable gives the folder-level sentence."""
from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from engine.data import cache_entries
from engine.data.corpus_sources import resolve_corpus
from engine.data.token_cache import CacheUnwritable, count_documents, prepared_store, trained_vocabulary
from engine.data.token_store import DOCUMENTS_FILE, META_FILE, SENTENCES_FILE, TOKENS_FILE, StoreWriter

ROWS = [f"The cat {i} sat on the mat. A dog ran to the tree. The bird sang {i % 7} times." for i in range(40)]


def use(kind: str, source: Any, cache: Path, tokenizer: Any) -> Any:
    """Use the corpus through one kind of entry; a value to compare with the first use."""
    if kind == "count":
        return count_documents(source, cache=cache)
    if kind == "store":
        return prepared_store(source, tokenizer, 16, cache=cache).content_hash
    vocabulary = trained_vocabulary(source, 80, 1, True, cache=cache)    # its ids differ between trainings on ties
    return vocabulary.vocab_size, vocabulary.backend.encode("The bird sang 3 times.").tokens


@pytest.fixture
def cached(tmp_path, tiny_tokenizer) -> dict[str, Any]:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps({"text": r}) for r in ROWS), encoding="utf-8")
    source, cache = resolve_corpus(str(path)), tmp_path / "cache"
    first = {kind: use(kind, source, cache, tiny_tokenizer) for kind in ("count", "store", "vocabulary")}
    entries = {"count": next((cache / "counts").glob("*.json")), "store": next((cache / "corpora").iterdir()),
               "vocabulary": next((cache / "vocabularies").iterdir())}
    return {"source": source, "cache": cache, "first": first, "entries": entries, "outside": tmp_path / "outside"}


def replace_with_folder(path: Path, outside: Path) -> None:
    _remove(path)
    path.mkdir()
    (path / "inside").write_text("x")


def replace_with_pipe(path: Path, outside: Path) -> None:
    _remove(path)
    os.mkfifo(path)


def replace_with_file(path: Path, outside: Path) -> None:
    _remove(path)
    path.write_text("not a folder")


def link_out_of_the_cache(path: Path, outside: Path) -> None:
    """A symlink to an exact copy outside the cache: the contents are fine, the link is not."""
    copy = outside / path.name
    outside.mkdir(exist_ok=True)
    (shutil.copytree if path.is_dir() else shutil.copy)(path, copy)
    _remove(path)
    path.symlink_to(copy)


def write(text: str) -> Callable[[Path, Path], None]:
    return lambda path, outside: path.write_text(text)


def grow(extra: int) -> Callable[[Path, Path], None]:
    return lambda path, outside: path.write_bytes(path.read_bytes() + b"\0" * extra)


def truncate(path: Path, outside: Path) -> None:
    path.write_bytes(path.read_bytes()[:-3])


def meta_with(**changes: Any) -> Callable[[Path, Path], None]:
    return lambda path, outside: path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


# (use, entry to set aside, file inside it to damage or "", damage, what the warning says was wrong)
CASES = {
    "count-is-a-folder": ("count", "", replace_with_folder, "it is a folder, not a file"),
    "count-is-a-pipe": ("count", "", replace_with_pipe, "it is a named pipe, not a file"),
    "count-is-a-symlink-out-of-the-cache": ("count", "", link_out_of_the_cache, "it is a symlink, not a file"),
    "count-is-invalid-json": ("count", "", write('{"documents": 40,'), "it is not valid JSON"),
    "count-is-not-an-object": ("count", "", write("[40]"), "it is not a JSON object"),
    "count-has-a-text-count": ("count", "", write('{"documents": "40"}'), "document count 40 is not a whole number"),
    "count-is-negative": ("count", "", write('{"documents": -1}'), "document count -1 is not a whole number"),
    "count-has-too-few-characters": ("count", "", write('{"documents": 40, "characters": 3}'),
                                     "character count 3 is not a whole number of at least 40"),
    "count-is-not-utf8": ("count", "", lambda path, outside: path.write_bytes(b"\xff\xfe{}"), "is not UTF-8 text"),
    "store-is-a-file": ("store", "", replace_with_file, "it is a file, not a folder"),
    "store-is-a-symlink-out-of-the-cache": ("store", "", link_out_of_the_cache, "it is a symlink, not a folder"),
    "tokens-bin-is-a-folder": ("store", TOKENS_FILE, replace_with_folder, "tokens.bin: it is a folder, not a file"),
    "tokens-bin-is-a-pipe": ("store", TOKENS_FILE, replace_with_pipe, "tokens.bin: it is a named pipe"),
    "tokens-bin-is-a-symlink-out-of-the-cache": ("store", TOKENS_FILE, link_out_of_the_cache,
                                                 "tokens.bin: it is a symlink"),
    "tokens-bin-is-truncated": ("store", TOKENS_FILE, truncate, "tokens.bin holds"),
    "sentence-offsets-are-a-folder": ("store", SENTENCES_FILE, replace_with_folder, "sentences.bin: it is a folder"),
    "document-offsets-are-too-long": ("store", DOCUMENTS_FILE, grow(8), "documents.bin holds"),
    "tokens-bin-is-missing": ("store", TOKENS_FILE, lambda path, outside: path.unlink(), "tokens.bin: it is missing"),
    "meta-json-is-a-folder": ("store", META_FILE, replace_with_folder, "meta.json: it is a folder, not a file"),
    "meta-json-is-invalid-json": ("store", META_FILE, write("{"), "meta.json cannot be read"),
    "meta-json-has-a-text-length": ("store", META_FILE, meta_with(tokens="12"), "'tokens' is not a whole number"),
    "meta-json-has-a-wrong-length": ("store", META_FILE, meta_with(documents=3), "documents.bin holds"),
    "vocabulary-is-a-file": ("vocabulary", "", replace_with_file, "it is a file, not a folder"),
    "tokenizer-json-is-a-folder": ("vocabulary", "tokenizer.json", replace_with_folder, "tokenizer.json: it is a folder"),
    "tokenizer-json-is-invalid": ("vocabulary", "tokenizer.json", write("{}"), "tokenizer.json is not a valid tokenizer.json:"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_entry_is_set_aside_named_and_rebuilt(cached, tiny_tokenizer, caplog, case):
    kind, inner, damage, fault = CASES[case]
    cache, entry = cached["cache"], cached["entries"][kind]
    damage(entry / inner if inner else entry, cached["outside"])
    with caplog.at_level(logging.WARNING):
        assert use(kind, cached["source"], cache, tiny_tokenizer) == cached["first"][kind], "the corpus still works"
    name = entry.relative_to(cache).as_posix()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"the token cache entry {name} is damaged (" in warnings[0], warnings
    assert fault in warnings[0], warnings[0]
    assert str(cache) not in warnings[0], "paths relative to the cache; the entry is named, not the cache folder"
    aside = [p for p in entry.parent.iterdir() if p.name.startswith(f"{entry.name}.damaged-")
             and not p.name.endswith(".txt")]
    assert len(aside) == 1 and aside[0].relative_to(cache).as_posix() in warnings[0], "set aside, exists, is named"
    assert fault in aside[0].with_name(aside[0].name + ".txt").read_text(), "the note says why"
    assert (entry.is_dir() if kind != "count" else entry.is_file()) and not entry.is_symlink(), "made again"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert use(kind, cached["source"], cache, tiny_tokenizer) == cached["first"][kind]
    assert not caplog.records, "the new entry is sound"


@pytest.mark.parametrize("subfolder, kind", [("counts", "count"), ("corpora", "store"), ("vocabularies", "vocabulary")])
def test_a_subfolder_that_is_a_file_is_set_aside(cached, tiny_tokenizer, caplog, subfolder, kind):
    cache = cached["cache"]
    shutil.rmtree(cache / subfolder)
    (cache / subfolder).write_text("in the way")
    with caplog.at_level(logging.WARNING):
        assert use(kind, cached["source"], cache, tiny_tokenizer) == cached["first"][kind]
    assert f"the token cache entry {subfolder} is damaged (it is a file, not a folder)" in caplog.text
    assert (cache / subfolder).is_dir() and len(list(cache.glob(f"{subfolder}.damaged-*"))) == 2   # entry and note


def test_only_the_newest_set_aside_copy_is_kept(cached, tiny_tokenizer):
    cache, entry = cached["cache"], cached["entries"]["count"]
    for _ in range(3):
        entry.write_text("{")
        use("count", cached["source"], cache, tiny_tokenizer)
    assert len(list(entry.parent.glob(f"{entry.name}.damaged-*"))) == 2, "one copy and its note"


@pytest.mark.parametrize("kind", ["count", "store", "vocabulary"])
def test_an_entry_that_cannot_be_set_aside_is_worked_around(cached, tiny_tokenizer, caplog, monkeypatch, kind):
    cache, entry = cached["cache"], cached["entries"][kind]
    replace_with_pipe(entry, cached["outside"])
    rename = os.rename

    def busy(source: Any, target: Any) -> None:            # a mount point, an immutable entry: EBUSY or EPERM
        if ".damaged-" in str(target):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        rename(source, target)

    monkeypatch.setattr(cache_entries.os, "rename", busy)
    with caplog.at_level(logging.WARNING):
        assert use(kind, cached["source"], cache, tiny_tokenizer) == cached["first"][kind], "it still works"
    name = entry.relative_to(cache).as_posix()
    assert f"the token cache entry {name} is damaged (it is a named pipe, not " in caplog.text
    assert "cannot be set aside (Device or resource busy)" in caplog.text and "without the cache this time" in caplog.text
    assert entry.is_fifo() and not list(entry.parent.glob("*.damaged-*")), "left in place, nothing half-moved"


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "read-only file system"),
                                          (errno.EACCES, "permission denied")])
def test_an_unwritable_cache_folder_still_gives_the_folder_sentence(cached, tiny_tokenizer, caplog, monkeypatch,
                                                                    code, reason):
    cache, entry = cached["cache"], cached["entries"]["store"]
    (entry / TOKENS_FILE).write_bytes(b"\0")              # a damaged entry too: set aside, but writing fails

    def unwritable(self: StoreWriter, *arrays: Any) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(StoreWriter, "add", unwritable)
    with caplog.at_level(logging.WARNING), pytest.raises(CacheUnwritable, match=rf"cannot be written in .*corpora "
                                                                                 rf"\(.*{reason}\); set BERT_"):
        use("store", cached["source"], cache, tiny_tokenizer)
    assert f"entry {entry.relative_to(cache).as_posix()} is damaged (tokens.bin holds 1 bytes" in caplog.text
