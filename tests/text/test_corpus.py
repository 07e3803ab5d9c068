"""Corpus: sentence splitting, uploaded .txt/.md/.jsonl files and their errors, the
built-in Shakespeare corpus (offline), tokenizer training with progress."""
from __future__ import annotations

import json
import random

import pytest

from engine.text import corpus
from engine.text.corpus import (
    builtin_corpus, corpus_stats, parse_play_markdown, read_documents, split_sentences, train_eval_split,
    train_tokenizer,
)


# ---------------------------------------------------------------------------- sentences
@pytest.mark.parametrize("text, expected", [
    ("Hello world. This is BERT! Is it? Yes.", ["Hello world.", "This is BERT!", "Is it?", "Yes."]),
    ("Mr. Smith met Dr. Jones at St. Paul's. They talked.", ["Mr. Smith met Dr. Jones at St. Paul's.", "They talked."]),
    ("Use a tokenizer, e.g. WordPiece. It is fast.", ["Use a tokenizer, e.g. WordPiece.", "It is fast."]),
    ("J. R. R. Tolkien wrote it. The end.", ["J. R. R. Tolkien wrote it.", "The end."]),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ('It ended. "Really?" she asked.', ["It ended.", '"Really?" she asked.']),
    ("Wait... What happened?! Nothing.", ["Wait...", "What happened?!", "Nothing."]),
    ("version 3.11 is out. the next one is not.", ["version 3.11 is out. the next one is not."]),
    ("Lines\nwrapped\n\tacross   space. Next one", ["Lines wrapped across space.", "Next one"]),
    ("No. 5 is here. Ok.", ["No. 5 is here.", "Ok."]),
    ("", []),
    ("   \n ", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_is_deterministic_and_lossless_up_to_spaces():
    text = "The cat sat. The dog ran! Did the bird sing? It did, e.g. loudly. Mr. Fox agreed."
    once = split_sentences(text)
    assert once == split_sentences(text)
    assert " ".join(once) == text


# ---------------------------------------------------------------------------- uploads
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
    assert corpus.MAX_UPLOAD_BYTES == 50 * 2**20
    monkeypatch.setattr(corpus, "MAX_UPLOAD_BYTES", 1000)
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


# ---------------------------------------------------------------------------- built-in corpus
PLAY = """# A Play

## ACT I

### SCENE I. A room.

_Enter ALICE and
BOB, with others_

**ALICE**  
Who is there? Speak, I say.  
Or else be gone.

**BOB**  
_\\[Aside]_ A friend\\--no more.

KING

**HENRY**  
Peace, Bob. _Exit_

### SCENE II. Elsewhere.

*Enter CAROL.*

**CAROL**  
All is well.  
"""


def test_parse_play_markdown_keeps_only_spoken_text():
    scenes = parse_play_markdown(PLAY)
    assert scenes == [["Who is there?", "Speak, I say.", "Or else be gone.", "A friend--no more.", "Peace, Bob."],
                      ["All is well."]]


def test_builtin_shakespeare_loads_offline(no_internet):
    docs = builtin_corpus("shakespeare")
    stats = corpus_stats(docs)
    assert 600 <= stats["documents"] <= 900                      # one per scene of ~38 plays
    assert 40_000 <= stats["sentences"] <= 70_000
    assert all(doc and all(s.strip() for s in doc) for doc in docs)
    sentences = {s for doc in docs for s in doc}
    assert "To be, or not to be: that is the question: Whether 'tis nobler in the mind to suffer The slings " \
           "and arrows of outrageous fortune, Or to take arms against a sea of troubles, And by opposing end them?" \
           in sentences
    assert not any(("**" in s or s.startswith("_") or "\\" in s) for s in sentences)
    assert builtin_corpus("shakespeare") == docs                 # deterministic (and cached)
    assert len(builtin_corpus(max_documents=5)) == 5
    with pytest.raises(ValueError, match="unknown built-in corpus"):
        builtin_corpus("wikipedia")


# ---------------------------------------------------------------------------- helpers
def test_train_eval_split():
    docs = [[f"Doc {i}."] for i in range(40)]
    train, held = train_eval_split(docs, 0.1, random.Random(0))
    assert len(held) == 4 and len(train) == 36
    assert sorted(map(tuple, train + held)) == sorted(map(tuple, docs))
    assert train_eval_split(docs, 0.1, random.Random(0)) == (train, held)
    train, held = train_eval_split(docs[:3], 0.01)
    assert len(held) == 1 and len(train) == 2
    assert train_eval_split(docs, 0.0)[1] == []


def test_train_tokenizer_reports_progress():
    docs = [["The cat sat on the mat.", "The dog ran."], ["A bird sang in the tree.", "The cat ran home."]] * 20
    seen = []
    tok = train_tokenizer(docs, vocab_size=120, min_frequency=1, lowercase=True,
                          progress=lambda fraction, message: seen.append((fraction, message)))
    assert seen[0][0] == 0.0 and seen[-1][0] == 1.0
    assert tok.token_to_id("[MASK]") == 4 and tok.token_to_id("cat") is not None
    assert tok.vocab_size <= 120
    with pytest.raises(ValueError, match="empty corpus"):
        train_tokenizer([], vocab_size=100)


def test_builtin_corpus_first_documents_are_a_prefix_of_the_whole():
    """Asking for a few scenes parses only the plays needed, and gives exactly the whole corpus's first scenes."""
    from engine.text.corpus import builtin_corpus

    few = builtin_corpus("shakespeare", max_documents=7)
    whole = builtin_corpus("shakespeare")
    assert len(few) == 7 and few == whole[:7]
    few[0].append("mutating a result must not change the next one")
    assert builtin_corpus("shakespeare", max_documents=7)[0] == whole[0]
