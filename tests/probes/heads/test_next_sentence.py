"""Next sentence: P(IsNext) and [CLS]'s attention equal ``transformers.BertForNextSentencePrediction`` on the
same random weights and the same tokens (its fast tokenizer on the same vocabulary)."""
from __future__ import annotations

import pytest
import torch
from transformers import BertForNextSentencePrediction

from engine.probes.heads.next_sentence import LABELS, next_sentence
from support.heads_helpers import hf_tokenizer, loaded_with
from support.reference import PARITY, hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")

PAIRS = [("the cat sat on the mat.", "then it ran to the house."),
         ("Who played the red car?", "A big bird sang in the tree!"),
         ("unwanted", "x")]


@pytest.fixture(scope="module")
def loaded(tiny_tokenizer):
    return loaded_with("nsp", tiny_tokenizer, seed=3)


@pytest.fixture(scope="module")
def reference(loaded, tiny_tokenizer, tmp_path_factory):
    return (hf_copy(loaded.model, BertForNextSentencePrediction),
            hf_tokenizer(tiny_tokenizer, tmp_path_factory.mktemp("tok")))


@pytest.mark.parametrize("a,b", PAIRS)
def test_equals_bert_for_next_sentence_prediction(loaded, reference, a, b) -> None:
    hf, tokenizer = reference
    result = next_sentence(loaded, a, b)
    inputs = tokenizer(a, b, return_tensors="pt")
    assert result.tokens == tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    assert result.token_type_ids == inputs["token_type_ids"][0].tolist()
    with torch.no_grad():
        out = hf(**inputs, output_attentions=True)
    assert result.logits == pytest.approx(out.logits[0].tolist(), abs=PARITY)
    expected = out.logits[0].softmax(-1)
    assert result.is_next == pytest.approx(expected[0].item(), abs=PARITY)
    assert result.probabilities == pytest.approx(expected.tolist(), abs=PARITY)
    cls_rows = torch.stack([layer[0, :, 0, :].mean(0) for layer in out.attentions])      # (L, S)
    assert torch.tensor(result.cls_attention).shape == cls_rows.shape
    assert torch.allclose(torch.tensor(result.cls_attention), cls_rows, atol=PARITY)
    assert [sum(row) for row in result.cls_attention] == pytest.approx([1.0] * len(cls_rows), abs=1e-5)


def test_pipeline_shape_is_every_label_best_first(loaded) -> None:
    result = next_sentence(loaded, *PAIRS[0])
    rows = result.to_pipeline()
    assert {r["label"] for r in rows} == set(LABELS) and rows[0]["score"] >= rows[1]["score"]
    assert sum(r["score"] for r in rows) == pytest.approx(1.0)
    assert dict((r["label"], r["score"]) for r in rows)["IsNext"] == result.is_next


@pytest.mark.parametrize("a,b,match", [
    ("", "b", "sentence A is empty"),
    ("a", "   ", "sentence B is empty"),
    ("a " * 40, "b " * 40, "83 tokens long but this model reads at most 64"),
])
def test_bad_input_is_a_sentence(loaded, a, b, match) -> None:
    with pytest.raises(ValueError, match=match):
        next_sentence(loaded, a, b)


def test_a_model_without_the_head_says_so(tiny_tokenizer) -> None:
    with pytest.raises(ValueError, match="has no next-sentence head"):
        next_sentence(loaded_with("qa", tiny_tokenizer), *PAIRS[0])
