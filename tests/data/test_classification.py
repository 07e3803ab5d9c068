"""Classification data: CSV / JSONL reading, deterministic label ids, features."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.data.classification import build_classification_dataset, read_classification_file
from engine.data.labels import label_names

ROOT = Path(__file__).resolve().parents[2]


def test_csv_with_pairs_quotes_and_blank_lines(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('id,text,text_pair,label\n1,"the cat, the dog",the mat,positive\n\n'
                    '2,"a ""quoted"" red car",,negative\n3,"two\nlines",x,positive\n', encoding="utf-8")
    examples = read_classification_file(path)
    assert [(e.text, e.text_pair, e.label) for e in examples] == [
        ("the cat, the dog", "the mat", "positive"), ('a "quoted" red car', None, "negative"),
        ("two\nlines", "x", "positive")]
    assert [e.line for e in examples] == [2, 4, 6]


def test_jsonl_with_integer_labels_and_tsv(tmp_path):
    path = tmp_path / "data.jsonl"
    rows = [{"text": "a", "label": 10}, {"text": "b", "label": 2, "text_pair": "c"}, {"text": "d", "label": 9}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    examples = read_classification_file(path)
    assert [(e.text, e.text_pair, e.label) for e in examples] == [("a", None, "10"), ("b", "c", "2"), ("d", None, "9")]
    assert label_names([e.label for e in examples]) == {0: "2", 1: "9", 2: "10"}     # numeric order
    tsv = tmp_path / "data.tsv"
    tsv.write_text("label\ttext\nyes\tthe cat\n")
    assert [(e.text, e.label) for e in read_classification_file(tsv)] == [("the cat", "yes")]


def test_string_labels_are_sorted():
    assert label_names(["positive", "negative", "positive"]) == {0: "negative", 1: "positive"}
    assert label_names(["b", "10", "a"]) == {0: "10", 1: "a", 2: "b"}


def test_the_bundled_sentiment_example():
    examples = read_classification_file(ROOT / "assets" / "examples" / "sentiment.csv")
    assert 40 <= len(examples) <= 60
    labels = [e.label for e in examples]
    assert label_names(labels) == {0: "negative", 1: "positive"}
    assert abs(labels.count("positive") - labels.count("negative")) <= 2


@pytest.mark.parametrize("name, content, message", [
    ("a.csv", "sentence,label\nhi,1\n", "missing text"),
    ("a.csv", "", "a.csv is empty; it needs examples"),
    ("a.csv", "   \n", "a.csv is empty \\(only whitespace\\)"),
    ("a.csv", "text,label\n", "has no examples"),
    ("a.csv", "text,label\n ,1\n", "line 2: \"text\" is missing or empty"),
    ("a.csv", "text,label\nhello,\n", "line 2: \"label\" must be a non-empty"),
    ("a.jsonl", '{"text": "a", "label": 1}\n{"text": "b"\n', "line 2: not valid JSON"),
    ("a.jsonl", '{"text": "a", "label": true}\n', "\"label\" must be"),
    ("a.jsonl", '["a", 1]\n', "expected a JSON object"),
])
def test_bad_files_name_the_problem(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read_classification_file(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_classification_file(tmp_path / "nope.csv")


def test_features_have_segments_and_label_ids(tiny_tokenizer, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"text": "the cat sat", "text_pair": "the dog ran", "label": "b"}\n'
                    '{"text": "a red car", "label": "a"}\n')
    examples = read_classification_file(path)
    data = build_classification_dataset(examples, tiny_tokenizer, {"a": 0, "b": 1}, 16, batch_size=2, shuffle=False)
    batch = data.batch(0, 0)
    tokens = [[tiny_tokenizer.id_to_token(int(i)) for i, m in zip(row, mask) if m]
              for row, mask in zip(batch.input_ids, batch.attention_mask)]
    assert tokens == [["[CLS]", "the", "cat", "sat", "[SEP]", "the", "dog", "ran", "[SEP]"],
                      ["[CLS]", "a", "red", "car", "[SEP]"]]
    assert batch.token_type_ids[0].tolist() == [0] * 5 + [1] * 4
    assert batch.token_type_ids[1].tolist() == [0] * 9 and batch.attention_mask[1].tolist() == [1] * 5 + [0] * 4
    assert batch.class_labels.tolist() == [1, 0] and batch.start_positions is None
    with pytest.raises(ValueError, match="unknown label\\(s\\) 'b' \\(line 1\\): the model's labels are 'a'"):
        build_classification_dataset(examples, tiny_tokenizer, {"a": 0}, 16, batch_size=2)
    long = build_classification_dataset(examples, tiny_tokenizer, {"a": 0, "b": 1}, 6, batch_size=2)
    assert max(len(r) for r in long.rows) == 6                               # truncated longest-first
