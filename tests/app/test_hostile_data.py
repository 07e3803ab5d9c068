"""Hostile files and settings at engine level: uploaded corpora (invalid UTF-8, binary, empty,
one sentence), SQuAD JSON with wrong offsets, impossible QA window lengths and model/training
hyperparameters. Every case: a ``ValueError``/``FileNotFoundError`` whose message a person can
act on (no exception class names), or a validated result; and no file written anywhere."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from engine.text import documents as text_documents
from engine.model.config import preset
from engine.data.classification import read_classification_file
from engine.data.multiple_choice import read_choice_file
from engine.data.pretraining import PretrainingDataset
from engine.data.qa_features import build_qa_dataset, check_lengths, read_squad
from engine.data.token_store import TokenStore
from engine.training.tasks.job_spec import JobSpec
from engine.training.loop.config import TrainingConfig
from support.hostile_helpers import Sandbox, assert_human, sandbox

CONTEXT = "the cat sat on the mat. the dog ran in the house."


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    with sandbox(tmp_path) as box:
        yield box


def refused(fn: Callable[[], Any], match: str, box: Sandbox) -> str:
    """``fn()`` raises a user error matching ``match`` with a human message and writes nothing."""
    before = box.files()
    with pytest.raises((ValueError, FileNotFoundError), match=match) as info:
        fn()
    assert box.files() == before, "a refused input wrote files"
    assert_human(str(info.value))
    return str(info.value)


# --- uploaded corpora ---------------------------------------------------------------------

UPLOADS: list[tuple[bytes, str, str]] = [
    (b"caf\xe9 au lait. Il pleut.\n", "latin1.txt", "not valid UTF-8 text \\(byte 0xe9 at offset 3\\)"),
    (b"ok so far \xc3\x28 then broken", "broken.md", "not valid UTF-8"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image.txt", "looks like a binary file"),
    (b"PK\x03\x04\x14\x00\x00\x00", "archive.jsonl", "looks like a binary file"),
    (b"", "empty.txt", "is empty"),
    (b"  \n\t\n \r\n", "blank.txt", "empty \\(only whitespace\\)"),
    (b"\xef\xbb\xbf", "bom-only.md", "empty \\(only whitespace\\)"),
    (b"Some text.", "corpus.exe", "unsupported file type '.exe'"),
    (b"Some text.", "corpus", "unsupported file type '\\(no extension\\)'"),
    (b'{"text": "A fine line."}\n{broken', "lines.jsonl", "line 2 is not valid JSON"),
    (b'{"title": "no text field"}', "lines.jsonl", "line 1 has no text"),
    (b'{"text": "   "}\n"  "', "lines.jsonl", "contains no text"),
]


@pytest.mark.parametrize("data,name,match", UPLOADS, ids=[u[1] + ":" + u[2][:20] for u in UPLOADS])
def test_bad_upload_is_refused(box: Sandbox, data: bytes, name: str, match: str) -> None:
    refused(lambda: text_documents.read_documents(data, name), match, box)
    path = box.outside / name                    # the same bytes as a file on disk
    path.write_bytes(data)
    refused(lambda: text_documents.read_documents(path), match, box)


def test_upload_over_the_size_cap(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_documents, "MAX_UPLOAD_BYTES", 1024)
    refused(lambda: text_documents.read_documents(b"A sentence. " * 200, "big.txt"), "the limit is", box)


def test_missing_upload_path(box: Sandbox) -> None:
    refused(lambda: text_documents.read_documents(box.outside / "gone.txt"), "no such file", box)


def test_one_sentence_corpus_cannot_make_nsp_pairs(box: Sandbox, tiny_tokenizer) -> None:
    documents = text_documents.read_documents(b"The cat sat on the mat.", "one.txt")
    assert documents == [["The cat sat on the mat."]]
    store = TokenStore.from_texts(documents, tiny_tokenizer, 29)
    refused(lambda: PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, nsp=True), "at least two documents", box)
    singles = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, nsp=False)   # without NSP it trains
    assert singles.instances(0) and all(not i.tokens_b for i in singles.instances(0))


# --- CSV files with huge fields -------------------------------------------------------------

UPLOAD_CAP = 10_000_000                  # the Fine-tune tab's cap (explorer/finetune/data.py MAX_UPLOAD_BYTES)
BIG_FIELD = "word " * (9 * 2**20 // 5)   # 9 MiB in one field: csv's default limit is 131,072 characters


def test_a_9_mb_single_field_csv_is_refused_by_its_header_in_one_short_sentence(box: Sandbox) -> None:
    path = box.outside / "one.csv"
    path.write_text(f'"{BIG_FIELD}"\n', encoding="utf-8")
    message = refused(lambda: read_classification_file(path, UPLOAD_CAP), "^one.csv: the header", box)
    assert message == ("one.csv: the header must name the columns text and label (text_pair optional); missing "
                       "text, label (found: word word word word word word word word…)")
    message = refused(lambda: read_choice_file(path, UPLOAD_CAP), "^one.csv, line 1: the header", box)
    assert message.endswith("; found word word word word word word word word…")


def test_fields_up_to_the_upload_cap_are_read_whole(box: Sandbox) -> None:
    path = box.outside / "big.csv"
    path.write_text(f'text,label\n"{BIG_FIELD}",pos\nshort,neg\n', encoding="utf-8")
    first, second = read_classification_file(path, UPLOAD_CAP)
    assert (first.text, first.label, second.text, second.line) == (BIG_FIELD, "pos", "short", 3)
    path = box.outside / "big.tsv"
    path.write_text(f"context\tchoice0\tchoice1\tlabel\nshort\ta\tb\t0\n{BIG_FIELD}\tc\td\t1\n", encoding="utf-8")
    one, two = read_choice_file(path, UPLOAD_CAP)
    assert (one.context, len(two.context), two.choices, two.label, two.where) == (
        "short", len(BIG_FIELD.strip()), ["c", "d"], 1, "big.tsv, line 3")


# --- SQuAD files ----------------------------------------------------------------------------

def squad_file(folder: Path, answers: list[dict[str, Any]], name: str = "squad.json") -> Path:
    qas = [{"id": f"q{i}", "question": "who sat on the mat?", "answers": [a]} for i, a in enumerate(answers)]
    path = folder / name
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("answer", [
    {"text": "cat", "answer_start": 7},               # off by three
    {"text": "cat", "answer_start": -4},
    {"text": "cat", "answer_start": 10_000},
    {"text": "", "answer_start": 4},
    {"text": "a cat that is not there", "answer_start": 4},
], ids=["shifted", "negative", "beyond", "empty-text", "not-in-context"])
def test_squad_wrong_offsets_are_skipped_and_counted(box: Sandbox, tiny_tokenizer, answer: dict) -> None:
    path = squad_file(box.outside, [answer, {"text": "cat", "answer_start": 4}])
    before = box.files()
    data = read_squad(path)
    assert (len(data.examples), data.skipped_answers, data.dropped_questions) == (1, 1, 1)
    assert "skipped 1 answer(s)" in data.summary() and "dropped 1 question(s)" in data.summary()
    features = build_qa_dataset(data.examples, tiny_tokenizer, max_seq_len=64, batch_size=2, doc_stride=16,
                                max_question_len=16)
    assert len(features) == 1 and box.files() == before


def test_squad_with_only_wrong_offsets_has_nothing_to_train(box: Sandbox, tiny_tokenizer) -> None:
    data = read_squad(squad_file(box.outside, [{"text": "dog", "answer_start": 0}]))
    assert data.examples == [] and data.dropped_questions == 1
    refused(lambda: build_qa_dataset(data.examples, tiny_tokenizer, 64, 2, 16, 16), "no questions", box)


@pytest.mark.parametrize("content,match", [
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe{}", "bad.json, line 1: not UTF-8 text \\(byte 0xff\\)"),
    (b"[1, 2, 3]", "is not SQuAD JSON"),
    (b'{"data": [{"title": "t"}]}', "has no list of \"paragraphs\""),
    (b'{"data": [{"paragraphs": [{"context": 5, "qas": []}]}]}', "needs a \"context\" string"),
    (json.dumps({"data": [{"paragraphs": [{"context": CONTEXT, "qas": [
        {"question": "who?", "answers": [{"text": "cat", "answer_start": "4"}]}]}]}]}).encode(),
     "answer_start\" \\(an integer\\)"),
], ids=["not-json", "invalid-utf8", "list", "no-paragraphs", "context-not-text", "start-as-string"])
def test_malformed_squad_file(box: Sandbox, content: bytes, match: str) -> None:
    path = box.outside / "bad.json"
    path.write_bytes(content)
    refused(lambda: read_squad(path), match, box)


def test_squad_file_missing(box: Sandbox) -> None:
    refused(lambda: read_squad(box.outside / "nope.json"), "no such file", box)


# --- window lengths and hyperparameters ---------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda tok: check_lengths(64, 64, 16, tok.num_special_tokens(True)), "doc_stride \\(64\\) must be smaller than the context room"),
    (lambda tok: check_lengths(64, 500, 16, tok.num_special_tokens(True)), "doc_stride \\(500\\) must be smaller"),
    (lambda tok: check_lengths(32, 8, 64, tok.num_special_tokens(True)), "must be smaller than the context room"),   # question fills it
    (lambda tok: check_lengths(64, -1, 16, tok.num_special_tokens(True)), "doc_stride >= 0"),
    (lambda tok: build_qa_dataset([], tok, 64, 2, 16, 16), "no questions"),
    (lambda tok: preset("tiny", num_attention_heads=3), "must be divisible by num_attention_heads"),
    (lambda tok: JobSpec(model_overrides={"hidden_size": 130, "num_attention_heads": 4}).validate(),
     "hidden_size \\(130\\) must be divisible"),
    (lambda tok: preset("tiny", num_hidden_layers=0), "num_hidden_layers must be a positive integer"),
    (lambda tok: preset("../../etc"), "unknown preset"),
    (lambda tok: TrainingConfig(learning_rate=-1e-4), "learning_rate must be a positive"),
    (lambda tok: TrainingConfig(learning_rate=float("nan")), "learning_rate must be a positive finite"),
    (lambda tok: TrainingConfig(batch_size=0), "batch_size must be an integer >= 1"),
    (lambda tok: TrainingConfig(max_seq_length=1024).check_model(preset("tiny")), "longer than the model"),
    (lambda tok: TrainingConfig(warmup_steps=50, total_steps=10), "warmup_steps \\(50\\) is more than"),
    (lambda tok: TrainingConfig(device="cuda:x"), "device must be"),
    (lambda tok: JobSpec({"learning_rate": 1e-4, "rm -rf": 1}).validate(), "unknown training setting"),
], ids=["stride=seq", "stride>seq", "question-fills-window", "negative-stride", "no-questions", "heads-3",
        "hidden-130", "zero-layers", "preset-traversal", "negative-lr", "nan-lr", "batch-0", "seq>positions",
        "warmup>steps", "bad-device", "unknown-setting"])
def test_impossible_settings(box: Sandbox, tiny_tokenizer, call: Callable[[Any], Any], match: str) -> None:
    refused(lambda: call(tiny_tokenizer), match, box)
