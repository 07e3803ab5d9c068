"""Documents (engine.text.documents): uploaded .txt/.md/.jsonl files and their errors, the held-out split."""
from __future__ import annotations

import json
import random

import pytest

from engine.text import documents
from engine.text.documents import read_documents, train_eval_split


def test_txt_and_md_blocks_become_documents(tmp_path):
    text = "First doc. Two sentences.\nWrapped line here.\n\n\n  \nSecond doc!\r\n\r\nThird? Yes.\n"
    docs = read_documents(text.encode(), "notes.txt")
    assert docs == [["First doc.", "Two sentences.", "Wrapped line here."], ["Second doc!"], ["Third?", "Yes."]]
    path = tmp_path / "notes.MD"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())             # a UTF-8 BOM is fine
    assert read_documents(path) == docs
    assert read_documents(str(path)) == docs


def test_jsonl_records_become_documents():
    lines = [json.dumps({"text": "One. Two.", "id": 1}), "", json.dumps("Plain string. Works."),
             json.dumps({"text": "   "})]
    docs = read_documents("\n".join(lines).encode(), "data.jsonl")
    assert docs == [["One.", "Two."], ["Plain string.", "Works."]]


@pytest.mark.parametrize("data, name, message", [
    (b"", "a.txt", "is empty"),
    (b"  \n\n \t", "a.txt", "is empty"),
    (b"hello\x00world", "a.txt", "binary"),
    (b"caf\xe9 au lait", "a.txt", "not valid UTF-8"),
    (b"some text", "a.pdf", "unsupported file type"),
    (b"some text", "README", "unsupported file type"),
    (b'{"text": "ok"}\n{"title": "no text"}\n', "a.jsonl", "line 2 has no text"),
    (b'{"text": "ok"}\n[1, 2]\n', "a.jsonl", "line 2 has no text"),
    (b'{"text": "ok"}\n{broken\n', "a.jsonl", "line 2 is not valid JSON"),
    (b'\n\n', "a.jsonl", "is empty"),
    (b'{"text": ""}\n', "a.jsonl", "no text"),
])
def test_bad_uploads_are_refused_clearly(data, name, message):
    with pytest.raises(ValueError, match=message):
        read_documents(data, name)


def test_utf8_error_says_where():
    with pytest.raises(ValueError, match=r"byte 0xe9 at offset 3"):
        read_documents(b"caf\xe9", "a.txt")
    with pytest.raises(ValueError, match="NUL byte at offset 5"):
        read_documents(b"hello\x00", "a.md")


def test_size_cap(tmp_path, monkeypatch):
    assert documents.MAX_UPLOAD_BYTES == 50 * 2**20
    monkeypatch.setattr(documents, "MAX_UPLOAD_BYTES", 1000)
    with pytest.raises(ValueError, match="limit is"):
        read_documents(b"a" * 1001, "big.txt")
    path = tmp_path / "big.txt"
    path.write_bytes(b"Word. " * 200)
    with pytest.raises(ValueError, match="limit is"):
        read_documents(path)
    assert read_documents(b"a" * 1000, "ok.txt") == [["a" * 1000]]


def test_bytes_need_a_filename_and_paths_must_exist(tmp_path):
    with pytest.raises(ValueError, match="filename"):
        read_documents(b"text")
    with pytest.raises(FileNotFoundError):
        read_documents(tmp_path / "missing.txt")


def test_train_eval_split():
    docs = [[f"Doc {i}."] for i in range(40)]
    train, held = train_eval_split(docs, 0.1, random.Random(0))
    assert len(held) == 4 and len(train) == 36
    assert sorted(map(tuple, train + held)) == sorted(map(tuple, docs))
    assert train_eval_split(docs, 0.1, random.Random(0)) == (train, held)
    train, held = train_eval_split(docs[:3], 0.01)
    assert len(held) == 1 and len(train) == 2
    assert train_eval_split(docs, 0.0)[1] == []
