"""Multiple-choice data: the CSV layout (context, choice0..N-1, label; SWAG's own), clear errors, (B, C, S)
features equal to transformers' tokenizer on each (context, choice) pair, and the built-in
"which sentence comes next?" examples."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import transformers

from engine.data.multiple_choice import build_choice_dataset, read_choice_file
from engine.data.next_sentence_choice import next_sentence_examples
from engine.text.tokenizer import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[2]
VOCAB = ROOT / "assets" / "tokenizer"


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_choices_come_from_the_header_and_swag_files_read_as_run_swag_builds_them(tmp_path):
    path = write(tmp_path, "mc.csv", 'id,context,choice0,choice1,choice2,label\n1,"It rained, so",we ran,we sang,'
                                     'we slept,0\n\n2,The sun,set,rose,fell,2\n')
    examples = read_choice_file(path)
    assert [(e.context, e.choices, e.label, e.where) for e in examples] == [
        ("It rained, so", ["we ran", "we sang", "we slept"], 0, "mc.csv, line 2"),
        ("The sun", ["set", "rose", "fell"], 2, "mc.csv, line 4")]
    swag = write(tmp_path, "swag.csv", "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
                                       "ending3,label\nv,1,x,Members sit.,A woman,gold,waves.,is gone.,sings.,runs.,3\n")
    example = read_choice_file(swag)[0]
    assert (example.context, example.choices, example.label) == (
        "Members sit.", ["A woman waves.", "A woman is gone.", "A woman sings.", "A woman runs."], 3)


@pytest.mark.parametrize("content, message", [
    ("text,choice0,choice1,label\n", "mc.csv, line 1: the header must name context, choice0 .. choiceN-1"),
    ("context,choice0,label\na,b,0\n", "N from 2 to 5"),
    ("context,choice0,choice2,label\na,b,c,0\n", "without gaps\\) and label; found context, choice0, choice2, label"),
    ("context," + ",".join(f"choice{k}" for k in range(6)) + ",label\n", "N from 2 to 5"),
    ("context,choice0,choice1,label\n", "mc.csv has a header but no examples"),
    ("context,choice0,choice1,label\na,b,c,2\n", "mc.csv, line 2: label 2 is out of range: there are 2 choices, so "
                                                 "it must be 0 to 1"),
    ("context,choice0,choice1,label\na,b,c,first\n", "line 2: label is 'first'; it must be the index of the right"),
    ("context,choice0,choice1,label\na,b,,1\n", "line 2: choice1 is empty; every choice needs a text"),
    ("context,choice0,choice1,label\n ,b,c,1\n", "line 2: the context is empty"),
    ("", "mc.csv is empty; it needs examples"),
    (b"context,choice0,choice1,label\n\xff,b,c,1\n", "mc.csv, line 2: not UTF-8 text"),
])
def test_bad_files_name_the_problem(tmp_path, content, message):
    with pytest.raises(ValueError, match=message):
        read_choice_file(write(tmp_path, "mc.csv", content))


def test_upload_cap_and_missing_file(tmp_path):
    path = write(tmp_path, "mc.csv", "context,choice0,choice1,label\n" + "a,b,c,1\n" * 1000)
    with pytest.raises(ValueError, match="mc.csv is 0.0 MiB, over the 0 MiB limit for uploads"):
        read_choice_file(path, max_bytes=100)
    with pytest.raises(FileNotFoundError):
        read_choice_file(tmp_path / "none.csv")


def test_the_bundled_example():
    examples = read_choice_file(ROOT / "assets" / "examples" / "choices.csv")
    assert len(examples) == 40 and {len(e.choices) for e in examples} == {4}
    assert set(Counter(e.label for e in examples)) == {0, 1, 2, 3}


def test_features_are_the_pairs_transformers_encodes_padded_to_b_c_s(tmp_path):
    ours, theirs = WordPieceTokenizer.from_file(VOCAB), transformers.BertTokenizerFast.from_pretrained(VOCAB)
    examples = read_choice_file(write(tmp_path, "mc.csv", "context,choice0,choice1,choice2,label\n"
                                      "The unaffable jurist left,the room quietly,at once,to dine with friends,1\n"
                                      "Hi,there,you,all of you here today and tomorrow as well,2\n"))
    data = build_choice_dataset(examples, ours, max_seq_length=12, batch_size=2, shuffle=False)
    batch = data.batch(0, 0)
    assert batch.input_ids.shape[:2] == (2, 3) and batch.choice_labels.tolist() == [1, 2]
    for b, example in enumerate(examples):
        for c, choice in enumerate(example.choices):
            expected = theirs(example.context, choice, truncation=True, max_length=12)
            width = len(expected["input_ids"])
            assert batch.input_ids[b, c, :width].tolist() == expected["input_ids"]
            assert batch.token_type_ids[b, c, :width].tolist() == expected["token_type_ids"]
            assert batch.attention_mask[b, c].tolist() == [1] * width + [0] * (batch.input_ids.shape[2] - width)
            assert (batch.token_type_ids[b, c, width:] == 0).all()


def test_next_sentence_choices_hold_the_true_next_sentence_and_others_from_other_documents():
    documents = [[f"d{d} s{s} ." for s in range(6)] for d in range(30)]
    examples = next_sentence_examples(documents, num_choices=4, seed=3)
    assert len(examples) == 30 * 5
    for example in examples:
        d, s = example.context.split()[:2]
        assert example.choices[example.label] == f"{d} s{int(s[1:]) + 1} ."
        wrong = [c for k, c in enumerate(example.choices) if k != example.label]
        assert len(wrong) == 3 and all(not c.startswith(d + " ") for c in wrong) and len(set(example.choices)) == 4
    positions = Counter(e.label for e in examples)
    assert set(positions) == {0, 1, 2, 3} and max(positions.values()) - min(positions.values()) < 30
    assert examples == next_sentence_examples(documents, num_choices=4, seed=3)          # seeded
    assert examples != next_sentence_examples(documents, num_choices=4, seed=4)
    assert len(next_sentence_examples(documents, num_choices=2, seed=3, max_examples=7)) == 7
    with pytest.raises(ValueError, match="at least two documents"):
        next_sentence_examples(documents[:1])
    with pytest.raises(ValueError, match="num_choices must be 2 to 5, got 6"):
        next_sentence_examples(documents, num_choices=6)
    with pytest.raises(ValueError, match="a document with at least two sentences"):
        next_sentence_examples([["one ."], ["two ."]])
