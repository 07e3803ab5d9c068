"""Choose: the choice probabilities equal the softmax of ``transformers.BertForMultipleChoice``'s logits on the
same random weights, fed the rows its tokenizer makes (``[CLS] context [SEP] choice [SEP]``, padded to the
longest): 2 to 5 choices of different lengths, so padding is exercised."""
from __future__ import annotations

import pytest
import torch
from transformers import BertForMultipleChoice

from engine.probes.heads.choose import ChooseResult, choose
from support.heads_helpers import hf_tokenizer, loaded_with
from support.reference import PARITY, hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")

CONTEXT = "the cat sat on the mat."
CHOICES = ["then it ran to the house.", "a car.", "Who played with the big red bird in the tree?",
           "unwanted running", "it sang"]


@pytest.fixture(scope="module")
def loaded(tiny_tokenizer):
    return loaded_with("multiple_choice", tiny_tokenizer, seed=7)


@pytest.fixture(scope="module")
def reference(loaded, tiny_tokenizer, tmp_path_factory):
    return hf_copy(loaded.model, BertForMultipleChoice), hf_tokenizer(tiny_tokenizer, tmp_path_factory.mktemp("tok"))


@pytest.mark.parametrize("count", [2, 3, 5])
def test_equals_bert_for_multiple_choice(loaded, reference, count) -> None:
    hf, tokenizer = reference
    choices = CHOICES[:count]
    result = choose(loaded, CONTEXT, choices)
    inputs = tokenizer([CONTEXT] * count, choices, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = hf(**{k: v.unsqueeze(0) for k, v in inputs.items()}).logits[0]       # (C,)
    assert result.logits == pytest.approx(logits.tolist(), abs=PARITY)
    assert result.probabilities == pytest.approx(logits.softmax(-1).tolist(), abs=PARITY)
    assert sum(result.probabilities) == pytest.approx(1.0)
    for row, ids, mask in zip(result.tokens, inputs["input_ids"], inputs["attention_mask"]):
        assert row == tokenizer.convert_ids_to_tokens(ids[mask.bool()])
    assert [d["choice"] for d in result.as_dicts()] == choices and [d["index"] for d in result.as_dicts()] == \
        list(range(count))


def test_the_order_of_choices_does_not_change_their_scores(loaded) -> None:
    forward = choose(loaded, CONTEXT, CHOICES[:3])
    backward = choose(loaded, CONTEXT, CHOICES[:3][::-1])
    assert backward.probabilities == pytest.approx(forward.probabilities[::-1], abs=1e-6)


def test_best_is_the_first_of_equal_ones() -> None:
    result = ChooseResult("c", ["a", "b", "c"], "m", [], [0.0, 1.0, 1.0], [0.2, 0.4, 0.4])
    assert result.best == 1


@pytest.mark.parametrize("context,choices,match", [
    ("", ["a", "b"], "the context is empty"),
    (CONTEXT, ["a"], "at least 2 choices"),
    (CONTEXT, ["a", " "], "choice 2 is empty"),
    (CONTEXT, ["a", "cat " * 60], "the context with choice 2 is 70 tokens long but this model reads at most 64"),
])
def test_bad_input_is_a_sentence(loaded, context, choices, match) -> None:
    with pytest.raises(ValueError, match=match):
        choose(loaded, context, choices)


def test_a_model_without_the_head_says_so(tiny_tokenizer) -> None:
    with pytest.raises(ValueError, match="has no multiple-choice head"):
        choose(loaded_with("classifier", tiny_tokenizer), CONTEXT, CHOICES[:2])
