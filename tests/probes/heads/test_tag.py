"""Tag words: equals ``transformers``' token-classification pipeline with ``aggregation_strategy="first"`` on a
``BertForTokenClassification`` with the same random weights and vocabulary, for BIO tags (entities merged, "O"
left out) and plain tags (UPOS-like), on texts whose words split into several pieces, [UNK] and punctuation;
and the grouping rules on hand-made words."""
from __future__ import annotations

import pytest
import torch
from transformers import BertForTokenClassification, pipeline

from engine.probes.heads.tag import TagSpan, group_words, split_tag, tag_details, tag_words
from support.heads_helpers import BIO, UPOS, hf_tokenizer, loaded_with
from support.reference import PARITY, hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat.", "Walter played with Xavier in Paris, then ran!",
         "unwanted running dogs sang 😀 at the house", "a  b\tcc ddd,eeee", "the [CLS] cat [SEP] sat [UNK] x [MASK]",
         "the\x00cat\x07sat\x1b[31m on"]
LABEL_SETS = {"bio": BIO, "upos": UPOS, "hyphen": {0: "O", 1: "B-LOC-CITY", 2: "I-LOC-CITY", 3: "X-Y"}}


@pytest.fixture(scope="module")
def hf_tok(tiny_tokenizer, tmp_path_factory):
    return hf_tokenizer(tiny_tokenizer, tmp_path_factory.mktemp("tok"))


def same(ours: list[dict], theirs: list[dict]) -> None:
    assert [(r["entity_group"], r["word"], r["start"], r["end"]) for r in ours] == \
        [(r["entity_group"], r["word"], r["start"], r["end"]) for r in theirs]
    assert [r["score"] for r in ours] == pytest.approx([float(r["score"]) for r in theirs], abs=PARITY)


@pytest.mark.parametrize("name", sorted(LABEL_SETS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_equals_the_token_classification_pipeline(tiny_tokenizer, hf_tok, name, seed) -> None:
    loaded = loaded_with("token_classifier", tiny_tokenizer, seed=seed, id2label=LABEL_SETS[name])
    model = hf_copy(loaded.model, BertForTokenClassification)
    pipe = pipeline("token-classification", model=model, tokenizer=hf_tok, aggregation_strategy="first",
                    device="cpu")
    for text in TEXTS:
        same(tag_words(loaded, text), pipe(text))
        same(tag_details(loaded, text).to_pipeline(ignore_labels=()), pipe(text, ignore_labels=[]))


def test_the_words_follow_the_first_piece(tiny_tokenizer, hf_tok) -> None:
    loaded = loaded_with("token_classifier", tiny_tokenizer, seed=4, id2label=UPOS)
    text = "unwanted running cat"
    result = tag_details(loaded, text)
    inputs = hf_tok(text, return_tensors="pt", return_offsets_mapping=True)
    offsets = inputs.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        probs = hf_copy(loaded.model, BertForTokenClassification)(**inputs).logits[0].softmax(-1)   # (S, L)
    word_ids = inputs.word_ids(0)
    assert result.tokens == hf_tok.convert_ids_to_tokens(inputs["input_ids"][0])
    assert len({w for w in word_ids if w is not None}) == len(result.words) == 3
    for index, word in enumerate(result.words):
        first = word_ids.index(index)                                       # the word's first piece
        assert word.label == UPOS[int(probs[first].argmax())]
        assert word.score == pytest.approx(float(probs[first].max()), abs=PARITY)
        assert (word.start, word.end) == (offsets[first][0], max(offsets[i][1] for i, w in enumerate(word_ids)
                                                                 if w == index))
        assert text[word.start:word.end] == text.split()[index]
    assert result.bio is False and tag_details(loaded_with("token_classifier", tiny_tokenizer, id2label=BIO),
                                               text).bio is True


def test_grouping_rules() -> None:
    def words(*tags: str) -> list[TagSpan]:
        return [TagSpan(tag, 0.5 + i / 10, f"w{i}", 3 * i, 3 * i + 2) for i, tag in enumerate(tags)]

    join = " ".join
    groups = group_words(words("B-PER", "I-PER", "B-PER", "O", "O", "I-LOC", "B-LOC", "NOUN", "NOUN", "I-NOUN"), join)
    assert [(g.label, g.word, g.start, g.end) for g in groups] == [
        ("PER", "w0 w1", 0, 5), ("PER", "w2", 6, 8), ("O", "w3 w4", 9, 14), ("LOC", "w5", 15, 17),
        ("LOC", "w6", 18, 20), ("NOUN", "w7 w8 w9", 21, 29)]
    assert groups[0].score == pytest.approx(0.55) and groups[-1].score == pytest.approx(1.3)
    assert split_tag("B-PER") == ("B", "PER") and split_tag("NOUN") == ("I", "NOUN")


@pytest.mark.parametrize("text,match", [("", "text is empty"), ("cat " * 70, "72 tokens long")])
def test_bad_input_is_a_sentence(tiny_tokenizer, text, match) -> None:
    with pytest.raises(ValueError, match=match):
        tag_words(loaded_with("token_classifier", tiny_tokenizer, id2label=BIO), text)


def test_a_model_without_the_head_says_so(tiny_tokenizer) -> None:
    with pytest.raises(ValueError, match="has no token-classification head"):
        tag_words(loaded_with("classifier", tiny_tokenizer), "the cat")
