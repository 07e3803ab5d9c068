"""Token-classification data: CoNLL-U and word<TAB>tag files, clear errors, and the first-piece label rule
checked against transformers' fast tokenizer (``word_ids()``) on the bundled vocabulary."""
from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from engine.data.features import IGNORE_INDEX
from engine.data.labels import label_names
from engine.data.tagged_text import read_tagged_file
from engine.data.token_features import build_token_dataset
from engine.text.tokenizer import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[2]
VOCAB = ROOT / "assets" / "tokenizer"
EXAMPLE = ROOT / "assets" / "examples" / "pos-ewt-sample.tsv"
UPOS = {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT", "SCONJ",
        "SYM", "VERB", "X"}

CONLLU = """# newdoc id = d1
# sent_id = 1
# text = Don't stop.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tstop\tstop\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
3.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t0:root\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = 2
1\tUnaffable\tunaffable\tADJ\tJJ\t_\t0\troot\t_\t_
"""


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_conllu_takes_upos_and_skips_multiword_tokens_empty_nodes_and_comments(tmp_path):
    sentences = read_tagged_file(write(tmp_path, "ud.conllu", CONLLU))
    assert [(s.words, s.tags) for s in sentences] == [
        (["Do", "n't", "stop", "."], ["AUX", "PART", "VERB", "PUNCT"]), (["Unaffable"], ["ADJ"])]
    assert [s.where for s in sentences] == ["ud.conllu, line 5", "ud.conllu, line 12"]
    # the format is recognised by its 10 columns too, whatever the file is called
    assert read_tagged_file(write(tmp_path, "ud.txt", CONLLU))[0].tags == ["AUX", "PART", "VERB", "PUNCT"]


def test_two_columns_with_blank_lines_between_sentences(tmp_path):
    text = "-DOCSTART-\tO\n\nJohn\tB-PER\nlives\tO\r\nin\tO\nNew\tB-LOC\nYork\tI-LOC\n\n\n\nHi O\n"
    sentences = read_tagged_file(write(tmp_path, "ner.tsv", text))
    assert [(s.words, s.tags) for s in sentences] == [
        (["John", "lives", "in", "New", "York"], ["B-PER", "O", "O", "B-LOC", "I-LOC"]), (["Hi"], ["O"])]
    assert sentences[1].where == "ner.tsv, line 11"


def test_a_hashtag_with_its_tag_is_a_word_and_a_tab_alone_ends_a_sentence(tmp_path):
    """Tweets (WNUT 17) have hashtags as words and a lone tab between sentences; a ``#`` line without a tab is a
    comment still."""
    text = "# a comment\n#London\tB-location\nrocks\tO\n\t\n#\tSYM\n"
    sentences = read_tagged_file(write(tmp_path, "tweets.conll", text))
    assert [(s.words, s.tags) for s in sentences] == [(["#London", "rocks"], ["B-location", "O"]), (["#"], ["SYM"])]


@pytest.mark.parametrize("name, content, message", [
    ("a.tsv", "the\tDET\tx\n", "a.tsv, line 1: expected a word and its tag separated by a tab .* found 3 column"),
    ("a.tsv", "the\tDET\ncat\n", "a.tsv, line 2: expected a word and its tag .* found 1 column"),
    ("a.tsv", "the\t\n", "a.tsv, line 1: the tag is empty; write word<TAB>tag"),
    ("a.tsv", "", "a.tsv is empty; it needs examples"),
    ("a.tsv", "\n\n  \n", "a.tsv is empty \\(only whitespace\\)"),
    ("a.tsv", "# only a comment\n", "a.tsv has no tagged words"),
    ("a.tsv", b"the\tDET\ncaf\xe9\tNOUN\n", "a.tsv, line 2: not UTF-8 text \\(byte 0xe9\\); save the tagged-words file"),
    ("a.tsv", b"the\tDET\n\x00\x01", "a.tsv, line 2: a NUL byte; this looks like a binary file"),
    ("b.conllu", "1\tthe\tthe\tDET\n", "b.conllu, line 1: a CoNLL-U word line has 10 tab-separated columns"),
    ("b.conllu", "1\tthe\tthe\t_\tDT\t_\t0\troot\t_\t_\n", "line 1: the word 'the' has no UPOS tag"),
    ("b.conllu", "x\tthe\tthe\tDET\tDT\t_\t0\troot\t_\t_\n", "line 1: the ID column is 'x'"),
])
def test_bad_files_name_the_file_the_line_and_the_fix(tmp_path, name, content, message):
    with pytest.raises(ValueError, match=message):
        read_tagged_file(write(tmp_path, name, content))


def test_missing_file_and_upload_cap(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_tagged_file(tmp_path / "nope.tsv")
    big = write(tmp_path, "big.tsv", "the\tDET\n" * 200_000)
    with pytest.raises(ValueError, match="big.tsv is 1.5 MiB, over the 1 MiB limit for uploads; use fewer examples"):
        read_tagged_file(big, max_bytes=2**20)
    assert len(read_tagged_file(big)[0].words) == 200_000                   # no cap on the command line


def test_the_bundled_part_of_speech_example():
    sentences = read_tagged_file(EXAMPLE)
    assert len(sentences) == 312 and sum(len(s.words) for s in sentences) == 5820
    assert {t for s in sentences for t in s.tags} == UPOS
    assert (EXAMPLE.parent / "README.md").read_text().count("CC BY-SA 4.0") >= 2


@pytest.fixture(scope="module")
def bundled() -> tuple[WordPieceTokenizer, transformers.PreTrainedTokenizerFast]:
    return WordPieceTokenizer.from_file(VOCAB), transformers.BertTokenizerFast.from_pretrained(VOCAB)


def reference_labels(word_ids: list[int | None], word_labels: list[int]) -> list[int]:
    """transformers' run_ner.py (label_all_tokens=False): the first piece of a word, -100 elsewhere."""
    labels, previous = [], None
    for word in word_ids:
        labels.append(-100 if word is None or word == previous else word_labels[word])
        previous = word
    return labels


def test_labels_sit_on_the_first_piece_of_each_word_as_transformers_aligns_them(bundled, tmp_path):
    ours, theirs = bundled
    text = ("Unaffable\tADJ\njurists\tNOUN\ndidn't\tAUX\ne-mail\tVERB\nthe\tDET\nCafé\tPROPN\n\u200b\tX\n"
            "résumés\tNOUN\n.\tPUNCT\n\nHi\tINTJ\n!\tPUNCT\n\n" + "".join(f"word{i}\tNOUN\n" for i in range(40)))
    sentences = read_tagged_file(write(tmp_path, "words.tsv", text))
    label2id = {name: i for i, name in label_names([t for s in sentences for t in s.tags]).items()}
    messages: list[str] = []
    data = build_token_dataset(sentences, ours, label2id, 32, batch_size=3, shuffle=False, log=messages.append)
    batch = data.batch(0, 0)
    for row, sentence in enumerate(sentences):
        expected = theirs(sentence.words, is_split_into_words=True, truncation=True, max_length=32)
        width = len(expected["input_ids"])
        assert batch.input_ids[row, :width].tolist() == expected["input_ids"]
        labels = reference_labels(expected.word_ids(), [label2id[t] for t in sentence.tags])
        assert batch.token_labels[row, :width].tolist() == labels, sentence.words
        assert (batch.token_labels[row, width:] == IGNORE_INDEX).all() and (batch.attention_mask[row, width:] == 0).all()
        assert batch.token_type_ids[row].tolist() == [0] * batch.input_ids.shape[1]
    pieces = theirs(sentences[0].words, is_split_into_words=True).word_ids()
    assert 6 not in pieces and (batch.token_labels[0] != IGNORE_INDEX).sum() == 8   # the zero-width word: no piece
    assert pieces.count(0) > 1 and pieces.count(3) > 1                           # multi-piece words were tested
    assert (batch.token_labels[2] != IGNORE_INDEX).sum() == 15       # 40 words of 2 pieces: 15 fit in 32 positions
    assert messages == ["26 word(s) have no label in the features: 1 sentence(s) were longer than 32 pieces and "
                        "were cut, other words made no word piece"]


def test_an_unknown_tag_names_its_line(bundled, tmp_path):
    sentences = read_tagged_file(write(tmp_path, "dev.tsv", "the\tDET\n\ncat\tNOUN\nsat\tVRB\n"))
    with pytest.raises(ValueError, match="unknown label\\(s\\) 'VRB' \\(dev.tsv, line 3\\): the model's labels are"):
        build_token_dataset(sentences, bundled[0], {"DET": 0, "NOUN": 1, "VERB": 2}, 16, batch_size=2)
