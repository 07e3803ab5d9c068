"""The task heads: sparse MLM equals dense, the tied decoder, which heads exist, classifier dropout.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from engine.model.heads import IGNORE_INDEX, BertWithHeads
from engine.model.encoder import BertModel
from reference import (
    CONFIGS, PATHS, assert_tied, batch, check, mlm_labels, ours_with_heads,
)

pytestmark = pytest.mark.usefixtures("one_thread")



# ---- sparse MLM --------------------------------------------------------------------------

def grads(model: BertWithHeads) -> dict[str, torch.Tensor]:
    return {
        "word_embeddings (tied decoder)": model.bert.embeddings.word_embeddings.weight.grad.clone(),
        "cls.predictions.bias": model.cls.predictions.bias.grad.clone(),
        "layer 0 query": model.bert.encoder.layer[0].attention.self.query.weight.grad.clone(),
        "transform.dense": model.cls.predictions.transform.dense.weight.grad.clone(),
    }


@pytest.mark.parametrize("name", ["odd", "tiny"])
def test_sparse_mlm_equals_dense(name):
    config = CONFIGS[name]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=15)
    inputs = batch(config, seed=15)
    labels = mlm_labels(inputs, config.vocab_size, seed=15)
    chosen = labels != IGNORE_INDEX
    assert 0 < int(chosen.sum()) < chosen.numel()

    dense = model(**inputs, labels=labels)
    dense.mlm_loss.backward()
    dense_grads = grads(model)
    model.zero_grad()
    sparse = model(**inputs, labels=labels, sparse_mlm=True)
    sparse.mlm_loss.backward()
    sparse_grads = grads(model)

    reference = F.cross_entropy(dense.prediction_logits.view(-1, config.vocab_size), labels.view(-1),
                                ignore_index=IGNORE_INDEX)
    check(f"{name} dense MLM loss vs cross_entropy", dense.mlm_loss, reference, PATHS)
    check(f"{name} sparse vs dense MLM loss", sparse.mlm_loss, dense.mlm_loss, PATHS)
    for key in dense_grads:
        check(f"{name} sparse vs dense grad {key}", sparse_grads[key], dense_grads[key], PATHS)
    assert sparse.prediction_logits is None
    assert torch.equal(sparse.masked_positions, chosen.nonzero())
    assert sparse.masked_logits.shape == (int(chosen.sum()), config.vocab_size)
    rows, cols = sparse.masked_positions.unbind(1)
    check(f"{name} masked_logits rows", sparse.masked_logits, dense.prediction_logits[rows, cols], PATHS)


@pytest.mark.parametrize("sparse", [True, False])
def test_no_labeled_positions(sparse):
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=16)
    inputs = batch(config, seed=16)
    labels = torch.full_like(inputs["input_ids"], IGNORE_INDEX)
    out = model(**inputs, labels=labels, sparse_mlm=sparse)
    assert out.mlm_loss.item() == 0.0 and out.loss.item() == 0.0
    out.loss.backward()
    grad = model.cls.predictions.bias.grad
    assert grad is not None and bool((grad == 0).all())
    if sparse:
        assert out.masked_logits.shape == (0, config.vocab_size)


# ---- tied decoder ------------------------------------------------------------------------



def test_decoder_is_tied_to_word_embeddings():
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=17).train()
    assert_tied(model)
    names = [n for n, _ in model.named_parameters()]
    assert "cls.predictions.decoder.weight" not in names  # listed once, as the embeddings
    state = model.state_dict()
    assert state["cls.predictions.decoder.weight"].data_ptr() == state["bert.embeddings.word_embeddings.weight"].data_ptr()

    before = model.bert.embeddings.word_embeddings.weight.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    inputs = batch(config, seed=17)
    for _ in range(2):
        out = model(**inputs, labels=mlm_labels(inputs, config.vocab_size), next_sentence_label=torch.tensor([0, 1, 0]))
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        assert_tied(model)
    assert not torch.equal(before, model.bert.embeddings.word_embeddings.weight)

    for moved in (copy.deepcopy(model), model.to(torch.float64)):
        assert_tied(moved)
    fresh = BertWithHeads(config, ("mlm", "nsp"))
    fresh.load_state_dict(model.float().state_dict())
    assert_tied(fresh)
    assert torch.equal(fresh.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight)


def test_decoder_gradient_reaches_the_embeddings():
    """The MLM loss through the decoder alone (no embedding lookup of the target ids) still
    moves the embedding matrix: one tensor gets both gradients."""
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("mlm",), seed=18)
    hidden = torch.randn(4, config.hidden_size)
    loss = model.cls.predictions(hidden).logsumexp(-1).sum()
    loss.backward()
    assert model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0


# ---- heads -------------------------------------------------------------------------------

def test_qa_only_model_has_no_other_heads():
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("qa",), seed=20)
    assert model.heads == ("qa",)
    assert not hasattr(model, "cls") and not hasattr(model, "classifier")
    assert model.bert.pooler is None
    assert not any(k.startswith("cls.") or k.startswith("bert.pooler") for k in model.state_dict())
    inputs = batch(config, seed=20)
    with torch.no_grad():
        out = model(**inputs, labels=mlm_labels(inputs, config.vocab_size), next_sentence_label=torch.tensor([0, 1, 0]),
                    class_labels=torch.tensor([0, 1, 0]))
    assert out.start_logits.shape == out.end_logits.shape == (3, 11)
    for field in ("pooler_output", "prediction_logits", "masked_logits", "masked_positions", "seq_relationship_logits",
                  "logits", "loss", "mlm_loss", "nsp_loss", "qa_loss", "classification_loss", "hidden_states",
                  "attentions", "queries", "keys", "attention_scores"):
        assert getattr(out, field) is None, field


def test_heads_pick_their_modules_and_outputs():
    config = CONFIGS["tiny"]
    inputs = batch(config, seed=21)
    mlm = ours_with_heads(config, ("mlm",), seed=21)
    assert hasattr(mlm.cls, "predictions") and not hasattr(mlm.cls, "seq_relationship")
    nsp = ours_with_heads(config, ("nsp",), seed=21)
    assert hasattr(nsp.cls, "seq_relationship") and not hasattr(nsp.cls, "predictions") and nsp.has_pooler
    classifier = ours_with_heads(config, ("cls",), seed=21)
    assert not hasattr(classifier, "cls") and classifier.has_pooler
    encoder_only = ours_with_heads(config, (), seed=21)
    assert encoder_only.has_pooler and not hasattr(encoder_only, "cls") and not hasattr(encoder_only, "qa_outputs")
    everything = ours_with_heads(config, ["cls", "qa", "nsp", "mlm"], seed=21)
    assert everything.heads == ("mlm", "nsp", "qa", "cls")
    with torch.no_grad():
        out = nsp(**inputs)
        assert out.seq_relationship_logits.shape == (3, 2) and out.prediction_logits is None
        out = classifier(**inputs)
        assert out.logits.shape == (3, config.num_labels) and out.start_logits is None
        out = encoder_only(**inputs)
        assert out.pooler_output.shape == (3, config.hidden_size) and out.logits is None
        out = everything(**inputs, compute=("nsp", "qa"))
        assert out.prediction_logits is None and out.logits is None
        assert out.seq_relationship_logits is not None and out.start_logits is not None
        assert everything(**inputs, compute=("missing-head",)).seq_relationship_logits is None
        out = everything(**inputs)
        assert None not in (out.prediction_logits, out.seq_relationship_logits, out.start_logits, out.logits)


@pytest.mark.parametrize("heads", [("ner",), ("mlm", "MLM"), ("qa", "pooler")])
def test_unknown_head(heads):
    with pytest.raises(ValueError, match="unknown heads"):
        BertWithHeads(CONFIGS["tiny"], heads)


@pytest.mark.parametrize("heads", [("nsp",), ("cls",), ("mlm", "nsp")])
def test_pooler_needed(heads):
    with pytest.raises(ValueError, match="pooler"):
        BertWithHeads(CONFIGS["tiny"], heads, add_pooling_layer=False)


def test_qa_with_pooler_on_request():
    assert BertWithHeads(CONFIGS["tiny"], ("qa",), add_pooling_layer=True).has_pooler


def test_sequence_longer_than_positions():
    config = CONFIGS["relu"]  # max_position_embeddings 16
    model = ours_with_heads(config, ("mlm", "nsp"), seed=22)
    encoder = BertModel(config).eval()
    ok = torch.ones(2, 16, dtype=torch.long)
    too_long = torch.ones(2, 17, dtype=torch.long)
    with torch.no_grad():
        assert model(ok).prediction_logits.shape == (2, 16, config.vocab_size)
        for explicit in (False, True):
            with pytest.raises(ValueError, match="max_position_embeddings"):
                model(too_long, output_attentions=explicit)
            with pytest.raises(ValueError, match="max_position_embeddings"):
                encoder(too_long, output_attentions=explicit)


def test_classifier_dropout():
    """classifier_dropout applies to the pooled output before the classifier; None means hidden_dropout_prob."""
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     classifier_dropout=0.5)
    model = ours_with_heads(config, ("cls",), seed=26).train()
    inputs = batch(config, seed=26)
    with torch.no_grad():
        a, b = model(**inputs), model(**inputs)
    assert torch.equal(a.pooler_output, b.pooler_output)
    assert not torch.allclose(a.logits, b.logits)
    fallback = BertWithHeads(config.replace(classifier_dropout=None, hidden_dropout_prob=0.25), ("cls",))
    assert fallback.dropout.p == 0.25
