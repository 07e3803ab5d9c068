"""Classify: equals ``transformers``' text-classification pipeline (``top_k=None``) on a
``BertForSequenceClassification`` with the same random weights and the same vocabulary: labels from
``id2label``, softmax (sigmoid for one label), best first, text pairs."""
from __future__ import annotations

import pytest
import torch
from transformers import BertForSequenceClassification, pipeline

from engine.probes.heads.classify import ClassifyResult, classify, classify_details
from support.heads_helpers import SENTIMENT, hf_tokenizer, loaded_with
from support.reference import PARITY, hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat.", "What a BIG red car!", "unwanted running"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tok")


def reference(loaded, tiny_tokenizer, tokenizer_dir):
    model = hf_copy(loaded.model, BertForSequenceClassification)
    return pipeline("text-classification", model=model, tokenizer=hf_tokenizer(tiny_tokenizer, tokenizer_dir),
                    device="cpu"), model


def same(ours: list[dict], theirs: list[dict]) -> None:
    assert [r["label"] for r in ours] == [r["label"] for r in theirs]
    assert [r["score"] for r in ours] == pytest.approx([r["score"] for r in theirs], abs=PARITY)


@pytest.mark.parametrize("labels", [SENTIMENT, {0: "LABEL_0", 1: "LABEL_1"}, {0: "score"}],
                         ids=["three", "two", "one"])
def test_equals_the_text_classification_pipeline(tiny_tokenizer, tokenizer_dir, labels) -> None:
    loaded = loaded_with("classifier", tiny_tokenizer, seed=5, id2label=labels)
    pipe, model = reference(loaded, tiny_tokenizer, tokenizer_dir)
    for text in TEXTS:
        same(classify(loaded, text), pipe(text, top_k=None))
        same(classify(loaded, text, top_k=2), pipe(text, top_k=2))
        same(classify(loaded, text, "then it ran."), pipe({"text": text, "text_pair": "then it ran."}, top_k=None))
    details = classify_details(loaded, TEXTS[0])
    inputs = pipe.tokenizer(TEXTS[0], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0]
    assert details.logits == pytest.approx(logits.tolist(), abs=PARITY)
    assert details.function == ("sigmoid" if len(labels) == 1 else "softmax")
    assert details.tokens == pipe.tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    assert details.labels == [labels[i] for i in range(len(labels))]


def test_an_empty_pair_is_no_pair(tiny_tokenizer) -> None:
    loaded = loaded_with("classifier", tiny_tokenizer, id2label=SENTIMENT)
    assert classify(loaded, TEXTS[0], "  ") == classify(loaded, TEXTS[0]) == classify(loaded, TEXTS[0], None)
    assert classify_details(loaded, TEXTS[0], "").text_pair is None


def test_ties_keep_label_order() -> None:
    result = ClassifyResult("t", None, "m", [], ["a", "b", "c"], [0.0, 1.0, 0.0], [0.2, 0.6, 0.2], "softmax")
    assert [r["label"] for r in result.to_pipeline()] == ["b", "a", "c"] and result.best == 1


@pytest.mark.parametrize("text,top_k,match", [
    ("", None, "text is empty"),
    ("cat " * 70, None, "72 tokens long but this model reads at most 64"),
    ("cat", 0, "top_k must be a whole number of at least 1"),
])
def test_bad_input_is_a_sentence(tiny_tokenizer, text, top_k, match) -> None:
    with pytest.raises(ValueError, match=match):
        classify(loaded_with("classifier", tiny_tokenizer, id2label=SENTIMENT), text, top_k=top_k)


def test_a_model_without_the_head_says_so(tiny_tokenizer) -> None:
    with pytest.raises(ValueError, match="has no sequence-classification head"):
        classify(loaded_with("nsp", tiny_tokenizer), TEXTS[0])
