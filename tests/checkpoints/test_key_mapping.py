"""engine.checkpoints.key_mapping: every Hugging Face BERT key layout in, exactly the keys a class expects out."""
from __future__ import annotations

import pytest
import torch

from engine.model.heads import BertWithHeads
from engine.checkpoints.key_mapping import (
    architectures_for, detect_heads, export_state, hf_classes, hf_key, normalise_keys,
)


def t(value: float = 0.0) -> torch.Tensor:
    return torch.full((2,), value)


# --- normalise_keys -----------------------------------------------------------------

def test_tf_gamma_beta_become_weight_bias():
    state = {"bert.embeddings.LayerNorm.gamma": t(1), "bert.embeddings.LayerNorm.beta": t(2),
             "bert.encoder.layer.0.output.LayerNorm.gamma": t(3),
             "cls.predictions.transform.LayerNorm.beta": t(4)}
    out, ignored = normalise_keys(state)
    assert ignored == []
    assert set(out) == {"bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias",
                        "bert.encoder.layer.0.output.LayerNorm.weight",
                        "cls.predictions.transform.LayerNorm.bias"}
    assert out["bert.embeddings.LayerNorm.bias"] is state["bert.embeddings.LayerNorm.beta"]
    # Only the LayerNorm parameters are renamed; a "gamma" elsewhere is left alone (and is foreign).
    out, ignored = normalise_keys({"bert.encoder.gamma": t()})
    assert "bert.encoder.gamma" in out and ignored == []


def test_ddp_module_prefix_is_stripped():
    out, ignored = normalise_keys({"module.bert.pooler.dense.weight": t(), "module.qa_outputs.bias": t(),
                                   "module.embeddings.word_embeddings.weight": t()})
    assert set(out) == {"bert.pooler.dense.weight", "qa_outputs.bias", "bert.embeddings.word_embeddings.weight"}
    assert ignored == []


def test_bertmodel_keys_get_the_bert_prefix():
    out, _ = normalise_keys({"embeddings.word_embeddings.weight": t(), "encoder.layer.1.attention.self.query.weight": t(),
                             "pooler.dense.bias": t()})
    assert set(out) == {"bert.embeddings.word_embeddings.weight",
                        "bert.encoder.layer.1.attention.self.query.weight", "bert.pooler.dense.bias"}


def test_decoder_bias_is_the_mlm_bias_and_decoder_weight_is_dropped():
    bias = torch.arange(5.0)
    out, ignored = normalise_keys({"cls.predictions.decoder.bias": bias, "cls.predictions.decoder.weight": t()})
    assert list(out) == ["cls.predictions.bias"] and out["cls.predictions.bias"] is bias
    assert ignored == []
    # When both are present (transformers 4 files), the explicit bias wins whatever the order.
    explicit = torch.ones(5)
    for order in (("cls.predictions.bias", "cls.predictions.decoder.bias"),
                  ("cls.predictions.decoder.bias", "cls.predictions.bias")):
        state = {k: (explicit if k == "cls.predictions.bias" else bias) for k in order}
        out, _ = normalise_keys(state)
        assert out["cls.predictions.bias"] is explicit


def test_buffers_are_dropped_silently():
    out, ignored = normalise_keys({"bert.embeddings.position_ids": torch.arange(4)[None],
                                   "embeddings.token_type_ids": torch.zeros(1, 4, dtype=torch.long),
                                   "bert.embeddings.word_embeddings.weight": t()})
    assert set(out) == {"bert.embeddings.word_embeddings.weight"}
    assert ignored == []


def test_foreign_keys_are_reported_as_ignored():
    state = {"roberta.embeddings.word_embeddings.weight": t(), "lm_head.dense.weight": t(), "something": t(),
             "bert.embeddings.word_embeddings.weight": t()}
    out, ignored = normalise_keys(state)
    assert set(out) == {"bert.embeddings.word_embeddings.weight"}
    assert sorted(ignored) == ["lm_head.dense.weight", "roberta.embeddings.word_embeddings.weight", "something"]


@pytest.mark.parametrize("classifier", ["classifier", "token_classifier", "multiple_choice"])
def test_normalised_real_model_keys_are_identity(classifier, make_config):
    model = BertWithHeads(make_config(), heads=("mlm", "nsp", "qa", classifier))
    state = model.state_dict()
    out, ignored = normalise_keys(state)
    assert ignored == []
    assert set(out) == set(state) - {"cls.predictions.decoder.weight"}


@pytest.mark.parametrize("architectures, head", [
    (None, "classifier"), ([], "classifier"), (["BertForPreTraining"], "classifier"),
    (["BertForSequenceClassification"], "classifier"),
    (["BertForTokenClassification"], "token_classifier"),
    (["BertForPreTraining", "BertForMultipleChoice"], "multiple_choice"),
    (["SomethingElse", 3, {"a": 1}, "BertForTokenClassification"], "token_classifier"),   # junk is skipped
])
def test_classifier_keys_belong_to_the_class_in_architectures(architectures, head):
    out, ignored = normalise_keys({"classifier.weight": t(1), "module.classifier.bias": t(2),
                                   "bert.pooler.dense.weight": t(3)}, architectures)
    assert set(out) == {f"{head}.weight", f"{head}.bias", "bert.pooler.dense.weight"} and ignored == []
    assert detect_heads(out) == ((head,), True)


@pytest.mark.parametrize("architectures", [["BertForSequenceClassification", "BertForTokenClassification"],
                                           ["BertForTokenClassification", "BertForMultipleChoice"]])
def test_two_classes_sharing_the_classifier_keys_are_refused_on_import(architectures):
    with pytest.raises(ValueError, match=f"config.json lists {architectures[0]} and {architectures[1]}.*classifier"):
        normalise_keys({"classifier.weight": t()}, architectures)


# --- detect_heads -----------------------------------------------------------------

@pytest.mark.parametrize("keys, heads, pooler", [
    (["bert.embeddings.word_embeddings.weight"], (), False),
    (["bert.pooler.dense.weight"], (), True),
    (["cls.predictions.bias", "cls.seq_relationship.weight", "bert.pooler.dense.weight"], ("mlm", "nsp"), True),
    (["cls.predictions.transform.dense.weight"], ("mlm",), False),
    (["qa_outputs.weight"], ("qa",), False),
    (["classifier.weight", "bert.pooler.dense.weight"], ("classifier",), True),
    (["token_classifier.weight", "bert.embeddings.word_embeddings.weight"], ("token_classifier",), False),
    (["multiple_choice.bias", "qa_outputs.bias", "bert.pooler.dense.weight"], ("qa", "multiple_choice"), True),
    (["classifier.bias", "qa_outputs.bias", "cls.seq_relationship.bias", "cls.predictions.bias",
      "bert.pooler.dense.weight"], ("mlm", "nsp", "qa", "classifier"), True),
    # the pooler bias alone does not make a usable pooler
    (["bert.pooler.dense.bias"], (), False),
])
def test_detect_heads(keys, heads, pooler):
    assert detect_heads({k: t() for k in keys}) == (heads, pooler)


# --- architectures_for --------------------------------------------------------------

@pytest.mark.parametrize("heads, expected", [
    ((), ["BertModel"]),
    (("mlm", "nsp"), ["BertForPreTraining"]),
    (("mlm",), ["BertForMaskedLM"]),
    (("nsp",), ["BertForNextSentencePrediction"]),
    (("qa",), ["BertForQuestionAnswering"]),
    (("classifier",), ["BertForSequenceClassification"]),
    (("mlm", "nsp", "qa", "classifier"), ["BertForPreTraining", "BertForQuestionAnswering", "BertForSequenceClassification"]),
    (("mlm", "qa"), ["BertForMaskedLM", "BertForQuestionAnswering"]),
    (("token_classifier",), ["BertForTokenClassification"]),
    (("mlm", "nsp", "token_classifier"), ["BertForPreTraining", "BertForTokenClassification"]),
    (("qa", "multiple_choice"), ["BertForQuestionAnswering", "BertForMultipleChoice"]),
])
def test_architectures_for(heads, expected):
    assert architectures_for(heads) == expected
    assert all(name in hf_classes() for name in expected)


# --- export_state -------------------------------------------------------------------

@pytest.fixture
def all_heads_state(make_config):
    return BertWithHeads(make_config(), heads=("mlm", "nsp", "qa", "classifier")).state_dict()


def _heads_of(keys) -> set[str]:
    return {k.split(".")[0] if not k.startswith("cls.") else ".".join(k.split(".")[:2]) for k in keys
            if not k.startswith("bert.")}


def test_export_bertmodel_is_unprefixed_with_pooler(all_heads_state):
    out = export_state(all_heads_state, ["BertModel"])
    assert all(not k.startswith(("bert.", "cls.", "qa_outputs.", "classifier.")) for k in out)
    assert "pooler.dense.weight" in out and "embeddings.word_embeddings.weight" in out
    assert out["embeddings.word_embeddings.weight"] is all_heads_state["bert.embeddings.word_embeddings.weight"]
    assert len(out) == sum(k.startswith("bert.") for k in all_heads_state)


def test_export_qa_has_no_pooler_and_only_qa_head(all_heads_state):
    out = export_state(all_heads_state, ["BertForQuestionAnswering"])
    assert not any(k.startswith("bert.pooler.") for k in out)
    assert _heads_of(out) == {"qa_outputs"}
    assert "bert.embeddings.word_embeddings.weight" in out


def test_export_pretraining_drops_tied_decoder_and_other_heads(all_heads_state):
    out = export_state(all_heads_state, ["BertForPreTraining"])
    assert "cls.predictions.decoder.weight" not in out
    assert "cls.predictions.bias" in out and "bert.pooler.dense.weight" in out
    assert _heads_of(out) == {"cls.predictions", "cls.seq_relationship"}


def test_export_mlm_has_no_pooler(all_heads_state):
    out = export_state(all_heads_state, ["BertForMaskedLM"])
    assert not any(k.startswith("bert.pooler.") for k in out)
    assert _heads_of(out) == {"cls.predictions"}


def test_export_several_classes_is_the_union(all_heads_state):
    out = export_state(all_heads_state, ["BertForQuestionAnswering", "BertForSequenceClassification"])
    assert "bert.pooler.dense.weight" in out
    assert _heads_of(out) == {"qa_outputs", "classifier"}


def test_export_unknown_architecture_is_refused(all_heads_state):
    with pytest.raises(ValueError, match="unknown architecture 'BertLMHeadModel'"):
        export_state(all_heads_state, ["BertLMHeadModel"])
    with pytest.raises(ValueError, match="unknown architecture"):
        export_state(all_heads_state, ["BertForQuestionAnswering", "RobertaModel"])


@pytest.mark.parametrize("head, hf_class, pooler", [("token_classifier", "BertForTokenClassification", False),
                                                     ("multiple_choice", "BertForMultipleChoice", True)])
def test_export_renames_our_classifier_to_transformers_name(head, hf_class, pooler, make_config):
    state = BertWithHeads(make_config(), heads=("mlm", "nsp", head)).state_dict()
    out = export_state(state, [hf_class])
    assert _heads_of(out) == {"classifier"} and ("bert.pooler.dense.weight" in out) == pooler
    assert out["classifier.weight"] is state[f"{head}.weight"] and out["classifier.bias"] is state[f"{head}.bias"]
    assert hf_key(f"{head}.weight") == "classifier.weight" and hf_key("qa_outputs.bias") == "qa_outputs.bias"
    both = export_state(state, ["BertForPreTraining", hf_class])
    assert _heads_of(both) == {"cls.predictions", "cls.seq_relationship", "classifier"}
    back, ignored = normalise_keys(both, ["BertForPreTraining", hf_class])
    assert ignored == [] and set(back) == set(state) - {"cls.predictions.decoder.weight"}


@pytest.mark.parametrize("architectures", [
    ["BertForSequenceClassification", "BertForTokenClassification"],
    ["BertForQuestionAnswering", "BertForMultipleChoice", "BertForTokenClassification"],
])
def test_export_of_two_classes_sharing_the_classifier_keys_is_refused(architectures, make_config):
    state = BertWithHeads(make_config(), heads=("token_classifier",)).state_dict()
    with pytest.raises(ValueError, match="cannot export both .* classifier\\.\\* in transformers"):
        export_state(state, architectures)
