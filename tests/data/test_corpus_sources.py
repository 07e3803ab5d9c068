"""Corpus sources: a file, a folder or a glob of .txt/.md/.jsonl/.parquet/.arrow files, a Hugging Face
dataset saved on disk, or the built-in corpus, read as a stream of documents; bad files are refused
naming the file and line."""
from __future__ import annotations

import json
import os

import datasets
import pytest

from engine.data.corpus_sources import dataset_source, documents_source, resolve_corpus
from engine.text.builtin_corpus import builtin_corpus
from engine.text.documents import read_documents

TEXT = "The cat sat. It was happy.\n\nA dog ran.\n  \nBirds sang all day.\nThe end.\n"
ROWS = ["First article. Two sentences.", "Second article here.", "   ", "Third one. And more."]


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "corpus"
    (root / "b").mkdir(parents=True)
    (root / "a.txt").write_text(TEXT, encoding="utf-8")
    (root / "b" / "c.jsonl").write_text("\n".join(json.dumps({"text": r}) for r in ROWS) + "\n\n", encoding="utf-8")
    (root / "b" / "notes.csv").write_text("ignored,file\n", encoding="utf-8")
    return root


def test_a_text_file_streams_the_documents_the_upload_reader_makes(folder):
    source = resolve_corpus(str(folder / "a.txt"))
    streamed = [text for text in source.texts()]
    assert len(streamed) == 3 and streamed[0].startswith("The cat sat.")
    from engine.text.sentences import split_sentences
    assert [split_sentences(t) for t in streamed] == read_documents(folder / "a.txt")


def test_a_folder_reads_every_supported_file_in_sorted_order(folder):
    source = resolve_corpus(str(folder))
    assert [p.name for p in source.files] == ["a.txt", "c.jsonl"], "other files are skipped"
    texts = list(source.texts())
    assert len(texts) == 6 and texts[3:] == [ROWS[0], ROWS[1], ROWS[3]], "blank records are not documents"
    assert list(source.texts(max_documents=4))[-1] == ROWS[0]


def test_a_glob_names_files_anywhere_under_it(folder):
    assert [p.name for p in resolve_corpus(str(folder / "**" / "*.jsonl")).files] == ["c.jsonl"]
    with pytest.raises(ValueError, match="no file matches"):
        resolve_corpus(str(folder / "**" / "*.md"))


def test_the_fingerprint_follows_the_files(folder):
    before = resolve_corpus(str(folder)).fingerprint()
    assert resolve_corpus(str(folder)).fingerprint() == before
    path = folder / "a.txt"
    path.write_text(TEXT + "\nMore text.\n", encoding="utf-8")
    os.utime(path, ns=(1, 1))
    assert resolve_corpus(str(folder)).fingerprint() != before


def test_parquet_and_arrow_files_and_a_saved_dataset_read_their_text_column(tmp_path):
    table = datasets.Dataset.from_dict({"text": ROWS, "id": list(range(len(ROWS)))})
    table.to_parquet(str(tmp_path / "part.parquet"))
    saved = tmp_path / "saved"
    table.save_to_disk(str(saved))
    arrow = next(saved.glob("*.arrow"))
    expected = [ROWS[0], ROWS[1], ROWS[3]]
    assert list(resolve_corpus(str(tmp_path / "part.parquet")).texts()) == expected
    assert list(resolve_corpus(str(arrow)).texts()) == expected
    source = dataset_source(str(saved))
    assert list(source.texts()) == expected and source.fingerprint() == dataset_source(str(saved)).fingerprint()
    with pytest.raises(ValueError, match="no column 'body'"):
        list(dataset_source(str(saved), text_column="body").texts())
    with pytest.raises(ValueError, match="cannot be loaded"):
        list(dataset_source(str(tmp_path / "no-such-dataset")).texts())


def test_bad_files_are_refused_naming_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "no text"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match='bad.jsonl line 2 has no text'):
        list(resolve_corpus(str(bad)).texts())
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"fine\ncaf\xe9\n")
    with pytest.raises(ValueError, match="latin.txt line 2 is not valid UTF-8"):
        list(resolve_corpus(str(latin)).texts())
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"\x00\x01")
    with pytest.raises(ValueError, match="binary"):
        list(resolve_corpus(str(binary)).texts())
    (tmp_path / "x.docx").write_text("x")
    with pytest.raises(ValueError, match="unsupported file type"):
        resolve_corpus(str(tmp_path / "x.docx"))
    with pytest.raises(ValueError, match="neither built in"):
        resolve_corpus(str(tmp_path / "missing.txt"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no"):
        resolve_corpus(str(tmp_path / "empty"))


def test_the_builtin_corpus_and_given_documents_stream_too():
    assert list(resolve_corpus("shakespeare").texts(max_documents=3)) == builtin_corpus("shakespeare", 3)
    given = documents_source([["One.", "Two."], ["  "], ["Three."]])
    assert list(given.texts()) == [["One.", "Two."], ["Three."]]
    assert given.fingerprint() != documents_source([["One.", "Two."], ["Four."]]).fingerprint()
