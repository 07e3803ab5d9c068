"""The three heads transformers stores as ``classifier.*`` (sequence classification, token
classification, multiple choice): which one a checkpoint holds, labels in config.json, and the
combinations one checkpoint cannot hold."""
from __future__ import annotations

import json

import pytest
import torch
import transformers

import engine
from support.checkpoint_helpers import assert_strict, compare, edit_config, hf_load, ours_model, siblings
from support.reference import hf_config, randomize_

pytestmark = pytest.mark.usefixtures("no_internet")

TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def test_token_labels_in_config_json_as_transformers_writes_them(make_config, inputs, tmp_path):
    model = ours_model(make_config(id2label=TAGS), ("token_classifier",))
    ours = json.loads((engine.save(model, None, tmp_path / "ours") / "config.json").read_text())
    hf, info = hf_load("BertForTokenClassification", tmp_path / "ours")
    assert_strict(info)
    assert hf.config.id2label == TAGS and hf.config.label2id == {v: k for k, v in TAGS.items()}
    hf.save_pretrained(tmp_path / "theirs")
    theirs = json.loads((tmp_path / "theirs" / "config.json").read_text())
    for key in ("id2label", "label2id", "architectures"):
        assert ours[key] == theirs[key], key
    assert ours["architectures"] == ["BertForTokenClassification"]
    loaded = engine.load(tmp_path / "theirs")
    assert loaded.heads == ("token_classifier",) and loaded.config.id2label == TAGS
    compare(loaded.model, hf, "BertForTokenClassification", inputs)


def test_tagger_with_pretraining_heads_exports_both_classes(make_config, inputs, tmp_path):
    model = ours_model(make_config(id2label=TAGS), ("mlm", "nsp", "token_classifier"))
    out = engine.save(model, None, tmp_path / "tagger")
    classes = json.loads((out / "config.json").read_text())["architectures"]
    assert classes == ["BertForPreTraining", "BertForTokenClassification"]
    for hf_class in classes:          # the union file: nothing missing for either class
        hf, info = hf_load(hf_class, out)
        assert not info["missing_keys"] and not info["mismatched_keys"] and not info["error_msgs"]
        compare(model, hf, hf_class, inputs)
    loaded = engine.load(out)
    assert loaded.heads == ("mlm", "nsp", "token_classifier") and loaded.config.id2label == TAGS
    with torch.no_grad():
        assert torch.equal(loaded.model(**inputs).token_classifier.logits, model(**inputs).token_classifier.logits)
    again = engine.load(engine.save(loaded.model, loaded.tokenizer, tmp_path / "again", ["BertForTokenClassification"]))
    assert again.heads == ("token_classifier",) and not again.model.has_pooler


def test_qa_with_multiple_choice_keeps_two_labels_for_qa(make_config, inputs, tmp_path):
    """transformers sizes qa_outputs by num_labels; multiple choice ignores it, so QA's 2 labels win."""
    model = ours_model(make_config(id2label=TAGS), ("qa", "multiple_choice"))
    out = engine.save(model, None, tmp_path / "qa-mc")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForQuestionAnswering", "BertForMultipleChoice"]
    assert config["id2label"] == {"0": "LABEL_0", "1": "LABEL_1"}
    for hf_class in config["architectures"]:
        hf, info = hf_load(hf_class, out)
        assert not info["missing_keys"] and not info["mismatched_keys"]
        compare(model, hf, hf_class, inputs)
    assert engine.load(out).heads == ("qa", "multiple_choice")


def test_multiple_choice_export_from_an_odd_config(tmp_path):
    """hidden 36 in 3 heads, intermediate 50; 2 questions of 4 padded choices each."""
    from support.reference import batch

    config = engine.BertConfig(vocab_size=150, hidden_size=36, num_attention_heads=3, intermediate_size=50,
                               num_hidden_layers=2, max_position_embeddings=20)
    model = ours_model(config, ("multiple_choice",), seed=3)
    out = engine.save(model, None, tmp_path / "mc")
    hf, info = hf_load("BertForMultipleChoice", out)
    assert_strict(info)
    inputs = {k: v.view(2, 4, 9) for k, v in batch(config, batch_size=8, seq_len=9, seed=3).items()}
    labels = torch.tensor([3, 1])
    loaded = engine.load(out)
    with torch.no_grad():
        theirs = hf(**inputs, labels=labels)
        for ours in (model, loaded.model):
            mine = ours(**inputs, choice_labels=labels)
            assert (mine.multiple_choice.logits - theirs.logits).abs().max() <= 1e-5
            assert (mine.loss - theirs.loss).abs() <= 1e-5


@pytest.mark.parametrize("architectures", [["BertForSequenceClassification", "BertForTokenClassification"],
                                           ["BertForPreTraining", "BertForMultipleChoice", "BertForTokenClassification"]])
def test_export_as_two_classifier_classes_is_refused(architectures, make_config, tmp_path):
    model = ours_model(make_config(), ("mlm", "nsp", "token_classifier"))
    with pytest.raises(ValueError, match="cannot export both .* stored as classifier"):
        engine.save(model, None, tmp_path / "out", architectures)
    assert siblings(tmp_path / "out") == []


def test_checkpoint_listing_two_classifier_classes_is_refused(make_config, tmp_path):
    out = engine.save(ours_model(make_config(), ("token_classifier",)), None, tmp_path / "m")
    edit_config(out, architectures=["BertForTokenClassification", "BertForSequenceClassification"])
    with pytest.raises(ValueError, match="config.json lists BertForTokenClassification and "
                                         "BertForSequenceClassification.*one checkpoint holds only one"):
        engine.load(out)


def test_multiple_choice_checkpoint_with_a_wrong_classifier_shape(make_config, tmp_path):
    hf = randomize_(transformers.BertForSequenceClassification(hf_config(make_config(id2label=TAGS))), 1)
    hf.save_pretrained(tmp_path / "m")
    edit_config(tmp_path / "m", architectures=["BertForMultipleChoice"])
    with pytest.raises(ValueError, match=r"classifier\.weight has shape \(5, 32\) but config.json implies \(1, 32\)"):
        engine.load(tmp_path / "m")


def test_require_head_names_the_new_heads(make_config, tmp_path):
    loaded = engine.load(engine.save(ours_model(make_config(), ("token_classifier",)), None, tmp_path / "t"))
    loaded.require_head("token_classifier")
    with pytest.raises(ValueError, match="no sequence-classification head .* it has: token-classification"):
        loaded.require_head("classifier")
    with pytest.raises(ValueError, match="no multiple-choice head"):
        loaded.require_head("multiple_choice")
