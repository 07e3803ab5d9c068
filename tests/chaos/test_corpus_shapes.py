"""Issue 38, items 4-6: corpora of hostile shapes. An empty name is refused; symlink loops cannot make a glob list
forever or repeat a file; pipes and devices are never read; a gigantic line is read in bounded pieces and a
gigantic block becomes several documents, so memory stays bounded; an over-long or too deeply nested .jsonl line
is refused naming its line."""
from __future__ import annotations

import glob
import json
import os
import time
import tracemalloc

import pytest

from engine.data import corpus_sources
from engine.data.corpus_sources import resolve_corpus


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_corpus_name_is_refused(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.txt").write_text("This folder's text must not be trained on silently.\n")
    with pytest.raises(ValueError, match="no corpus was named"):
        resolve_corpus(name)


def test_symlink_loops_end_and_each_file_is_listed_once(tmp_path):
    root = tmp_path / "d"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("One sentence here.\n")
    (root / "l1").symlink_to(".")
    (root / "l2").symlink_to(".")
    (root / "sub" / "again.txt").symlink_to(root / "sub" / "a.txt")
    started = time.monotonic()
    by_glob = resolve_corpus(str(root / "**" / "*.txt"))
    by_folder = resolve_corpus(str(root))
    assert time.monotonic() - started < 60          # generous for a loaded machine: a loop that blows up takes far longer
    assert [p.relative_to(root).as_posix() for p in by_glob.files] == ["sub/a.txt"]
    assert by_folder.files == by_glob.files


def test_the_glob_grammar_matches_pythons(tmp_path):
    root = tmp_path / "c"
    for name in ("x.txt", "a/y.txt", "a/b/z.txt", "a/b/w.md", "k1.jsonl", "k2.jsonl", ".hidden/h.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text('"text"\n' if name.endswith(".jsonl") else "Text.\n")
    for pattern in ("**/*.txt", "a/**/*.md", "**/y.txt", "k[12].jsonl", "k?.jsonl", "a/**", "*.txt"):
        expected = sorted(p for p in glob.glob(str(root / pattern), recursive=True) if os.path.isfile(p))
        if any(not p.endswith((".txt", ".md", ".jsonl")) for p in expected):
            continue
        assert [str(p) for p in resolve_corpus(str(root / pattern)).files] == expected, pattern


def test_pipes_and_devices_are_never_read(tmp_path):
    root = tmp_path / "e"
    root.mkdir()
    (root / "real.txt").write_text("A real sentence.\n")
    os.mkfifo(root / "pipe.txt")
    (root / "zero.txt").symlink_to("/dev/zero")
    assert [p.name for p in resolve_corpus(str(root)).files] == ["real.txt"]
    assert [p.name for p in resolve_corpus(str(root / "*.txt")).files] == ["real.txt"]
    with pytest.raises(ValueError, match="neither built in"):
        resolve_corpus(str(root / "pipe.txt"))
    source = corpus_sources.CorpusSource("files", "pipe", (root / "pipe.txt",))
    with pytest.raises(ValueError, match="pipe.txt is not a regular file \\(a named pipe\\)"):
        list(source.texts())                        # opened without blocking, then refused


def test_one_gigantic_line_is_read_in_bounded_pieces(tmp_path):
    words = ("river bank money " * 700_000).encode()      # ~12 MB, no newline
    path = tmp_path / "one-line.txt"
    path.write_bytes(words)
    tracemalloc.start()
    lengths, words_read, ends = [], 0, set()
    for document in resolve_corpus(str(path)).texts():       # streamed, nothing kept
        lengths.append(len(document))
        words_read += document.count(" ")
        ends.add(document[-1])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(lengths) >= 11 and max(lengths) <= corpus_sources.MAX_DOCUMENT_CHARS
    assert sum(lengths) == len(words) and words_read == 2_100_000 and ends == {" "}   # no word cut, none lost
    bound = 6 * corpus_sources.MAX_TEXT_PIECE_BYTES       # a few pieces in flight, whatever the line's length
    assert peak < bound < len(words), f"peak {peak:,} bytes traced for a {len(words):,}-byte line"


def test_a_long_line_without_spaces_is_cut_between_characters(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_sources, "MAX_TEXT_PIECE_BYTES", 7)
    text = "héé€€𝄞abc𝄞é" * 3 + "\n\nNext document.\n"
    path = tmp_path / "utf8.txt"
    path.write_text(text, encoding="utf-8")
    documents = list(resolve_corpus(str(path)).texts())
    assert documents == ["héé€€𝄞abc𝄞é" * 3 + "\n", "Next document.\n"]


def test_a_jsonl_line_over_the_limit_or_nested_too_deep_is_refused_by_line(tmp_path, monkeypatch):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "short"}) + "\n" + json.dumps({"text": "x" * 500}) + "\n")
    monkeypatch.setattr(corpus_sources, "MAX_JSONL_LINE_BYTES", 100)
    with pytest.raises(ValueError, match="docs.jsonl line 2 is longer than"):
        list(resolve_corpus(str(path)).texts())
    monkeypatch.undo()
    path.write_text(json.dumps({"text": "fine"}) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match="docs.jsonl line 2 nests JSON too deeply"):
        list(resolve_corpus(str(path)).texts())


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_a_damaged_table_file_is_refused_naming_it(tmp_path, suffix):
    path = tmp_path / f"wiki.{suffix}"
    path.write_bytes(b"PAR1 not a table at all " * 20)
    with pytest.raises(ValueError, match=f"wiki.{suffix} is not a readable {suffix} file"):
        list(resolve_corpus(str(path)).texts())
