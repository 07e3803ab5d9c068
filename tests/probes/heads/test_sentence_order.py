"""ALBERT's sentence-order head in the Heads tab's next-sentence place (docs/design/families.md): the probe gives
the softmax of ``transformers``' ``AlbertForPreTraining`` ``sop_logits`` and names its outputs InOrder / Swapped;
the view's verdict speaks of order, not of a next sentence."""
from __future__ import annotations

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load
from engine.probes.heads.next_sentence import LABELS, ORDER_LABELS, next_sentence
from explorer.heads.next_sentence import pipeline_json, verdict
from support.saved_families import save_family_model

pytestmark = pytest.mark.usefixtures("one_thread")
A, B = "The cat sat on the mat.", "Soon it was fast asleep in the warm sun."


def test_albert_sentence_order_is_named_and_equals_transformers(tmp_path):
    folder = save_family_model("albert", tmp_path / "albert", "ForPreTraining")
    loaded = load(folder)
    result = next_sentence(loaded, A, B)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer(A, B, return_tensors="pt")
    inputs["token_type_ids"] = torch.tensor([loaded.tokenizer.encode(A, B).token_type_ids])   # as its pretraining
    theirs = transformers.AlbertForPreTraining.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = theirs(**inputs).sop_logits[0].softmax(-1)
    assert result.probabilities == pytest.approx(expected.tolist(), abs=1e-5)
    assert result.labels == ORDER_LABELS and result.is_order
    assert {row["label"] for row in pipeline_json(result)} == set(ORDER_LABELS)
    assert "sentence-order head" in verdict(result) and "IsNext" not in verdict(result)


def test_bert_keeps_next_sentence_labels(tiny_tokenizer):
    from support.probing_helpers import tiny_model
    from engine.model.loaded_model import LoadedModel

    model = tiny_model(0)
    result = next_sentence(LoadedModel(model, tiny_tokenizer, model.config, "tiny"), "the cat sat", "the dog ran")
    assert result.labels == LABELS and not result.is_order and "P(IsNext)" in verdict(result)
