"""The task heads: sparse MLM equals dense, the tied decoder, which heads exist, classifier dropout,
the token-classification loss, the multiple-choice input rules, one classifier head per model.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from engine.model.heads import IGNORE_INDEX, BertWithHeads
from engine.model.encoder import BertModel
from support.reference import (
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

    dense = model(**inputs, labels=labels).mlm
    dense.loss.backward()
    dense_grads = grads(model)
    model.zero_grad()
    sparse = model(**inputs, labels=labels, sparse_mlm=True).mlm
    sparse.loss.backward()
    sparse_grads = grads(model)

    reference = F.cross_entropy(dense.logits.view(-1, config.vocab_size), labels.view(-1),
                                ignore_index=IGNORE_INDEX)
    check(f"{name} dense MLM loss vs cross_entropy", dense.loss, reference, PATHS)
    check(f"{name} sparse vs dense MLM loss", sparse.loss, dense.loss, PATHS)
    for key in dense_grads:
        check(f"{name} sparse vs dense grad {key}", sparse_grads[key], dense_grads[key], PATHS)
    assert sparse.sparse and not dense.sparse and dense.positions is None
    assert torch.equal(sparse.positions, chosen.nonzero())
    assert sparse.logits.shape == (int(chosen.sum()), config.vocab_size)
    rows, cols = sparse.positions.unbind(1)
    check(f"{name} sparse logits rows", sparse.logits, dense.logits[rows, cols], PATHS)


def test_mlm_positions_pick_the_rows_without_labels():
    """``mlm_positions`` runs the vocabulary projection where asked (no labels, no loss); with labels,
    the loss is over the labelled ones among them."""
    config = CONFIGS["odd"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=19).eval()
    inputs = batch(config, seed=19)
    wanted = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
    wanted[0, [1, 4]] = True
    wanted[2, 3] = True
    with torch.no_grad():
        dense = model(**inputs, compute=("mlm",)).mlm
        picked = model(**inputs, mlm_positions=wanted, compute=("mlm",))
        assert picked.nsp is None and picked.loss is None and picked.mlm.loss is None
        assert picked.mlm.positions.tolist() == [[0, 1], [0, 4], [2, 3]]
        check("mlm_positions rows", picked.mlm.logits, dense.logits[wanted], PATHS)
        labels = torch.full_like(inputs["input_ids"], IGNORE_INDEX)
        labels[0, 4], labels[1, 2] = 7, 9                  # (1, 2) is labelled but not picked
        out = model(**inputs, labels=labels, mlm_positions=wanted, compute=("mlm",)).mlm
        check("mlm_positions loss", out.loss, F.cross_entropy(dense.logits[0, 4][None], torch.tensor([7])), PATHS)


@pytest.mark.parametrize("sparse", [True, False])
def test_no_labeled_positions(sparse):
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=16)
    inputs = batch(config, seed=16)
    labels = torch.full_like(inputs["input_ids"], IGNORE_INDEX)
    out = model(**inputs, labels=labels, sparse_mlm=sparse)
    assert out.mlm.loss.item() == 0.0 and out.loss.item() == 0.0
    out.loss.backward()
    grad = model.cls.predictions.bias.grad
    assert grad is not None and bool((grad == 0).all())
    if sparse:
        assert out.mlm.logits.shape == (0, config.vocab_size) and out.mlm.positions.shape == (0, 2)


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
    assert out.qa.start_logits.shape == out.qa.end_logits.shape == (3, 11)
    assert out.mlm is None and out.nsp is None and out.classifier is None
    assert out.qa.loss is None and out.loss is None                   # no start/end positions given
    for field in ("pooler_output", "hidden_states", "attentions", "queries", "keys", "attention_scores"):
        assert getattr(out.encoder, field) is None, field


def test_heads_pick_their_modules_and_outputs():
    config = CONFIGS["tiny"]
    inputs = batch(config, seed=21)
    mlm = ours_with_heads(config, ("mlm",), seed=21)
    assert hasattr(mlm.cls, "predictions") and not hasattr(mlm.cls, "seq_relationship")
    nsp = ours_with_heads(config, ("nsp",), seed=21)
    assert hasattr(nsp.cls, "seq_relationship") and not hasattr(nsp.cls, "predictions") and nsp.has_pooler
    classifier = ours_with_heads(config, ("classifier",), seed=21)
    assert not hasattr(classifier, "cls") and classifier.has_pooler
    encoder_only = ours_with_heads(config, (), seed=21)
    assert encoder_only.has_pooler and not hasattr(encoder_only, "cls") and not hasattr(encoder_only, "qa_outputs")
    everything = ours_with_heads(config, ["classifier", "qa", "nsp", "mlm"], seed=21)
    assert everything.heads == ("mlm", "nsp", "qa", "classifier")
    with torch.no_grad():
        out = nsp(**inputs)
        assert out.nsp.logits.shape == (3, 2) and out.mlm is None
        out = classifier(**inputs)
        assert out.classifier.logits.shape == (3, config.num_labels) and out.qa is None
        out = encoder_only(**inputs)
        assert out.encoder.pooler_output.shape == (3, config.hidden_size)
        assert (out.mlm, out.nsp, out.qa, out.classifier) == (None, None, None, None)
        out = everything(**inputs, compute=("nsp", "qa"))
        assert out.mlm is None and out.classifier is None
        assert out.nsp is not None and out.qa is not None
        assert everything(**inputs, compute=("missing-head",)).nsp is None
        out = everything(**inputs)
        assert None not in (out.mlm, out.nsp, out.qa, out.classifier)
        assert out.mlm.logits.shape == (3, 11, config.vocab_size) and not out.mlm.sparse


@pytest.mark.parametrize("heads", [("ner",), ("mlm", "MLM"), ("qa", "pooler")])
def test_unknown_head(heads):
    with pytest.raises(ValueError, match="unknown heads"):
        BertWithHeads(CONFIGS["tiny"], heads)


@pytest.mark.parametrize("heads", [("nsp",), ("classifier",), ("mlm", "nsp"), ("multiple_choice",)])
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
        assert model(ok).mlm.logits.shape == (2, 16, config.vocab_size)
        for explicit in (False, True):
            with pytest.raises(ValueError, match="max_position_embeddings"):
                model(too_long, output_attentions=explicit)
            with pytest.raises(ValueError, match="max_position_embeddings"):
                encoder(too_long, output_attentions=explicit)


def test_classifier_dropout():
    """classifier_dropout applies to the pooled output before the classifier; None means hidden_dropout_prob."""
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     classifier_dropout=0.5)
    model = ours_with_heads(config, ("classifier",), seed=26).train()
    inputs = batch(config, seed=26)
    with torch.no_grad():
        a, b = model(**inputs), model(**inputs)
    assert torch.equal(a.encoder.pooler_output, b.encoder.pooler_output)
    assert not torch.allclose(a.classifier.logits, b.classifier.logits)
    fallback = BertWithHeads(config.replace(classifier_dropout=None, hidden_dropout_prob=0.25), ("classifier",))
    assert fallback.dropout.p == 0.25


# ---- token classification and multiple choice ---------------------------------------------

@pytest.mark.parametrize("heads", [("classifier", "token_classifier"), ("classifier", "multiple_choice"),
                                   ("mlm", "token_classifier", "multiple_choice")])
def test_one_classifier_head_per_model(heads):
    """transformers calls all three modules ``classifier``: one checkpoint cannot hold two of them."""
    with pytest.raises(ValueError, match="at most one of the heads .*'classifier'"):
        BertWithHeads(CONFIGS["tiny"], heads)


def test_token_classifier_and_multiple_choice_modules():
    config = CONFIGS["odd"]                                  # 3 labels
    tagger = ours_with_heads(config, ("mlm", "nsp", "token_classifier"), seed=30)
    assert tagger.heads == ("mlm", "nsp", "token_classifier")
    assert tagger.token_classifier.weight.shape == (3, config.hidden_size)
    assert not hasattr(tagger, "classifier") and not hasattr(tagger, "multiple_choice")
    assert not ours_with_heads(config, ("token_classifier",)).has_pooler
    chooser = ours_with_heads(config, ("qa", "multiple_choice"), seed=30)
    assert chooser.has_pooler and chooser.multiple_choice.weight.shape == (1, config.hidden_size)
    assert {k.split(".")[0] for k in chooser.state_dict()} == {"bert", "qa_outputs", "multiple_choice"}


def test_token_loss_is_the_mean_over_labelled_positions():
    config = CONFIGS["odd"]
    model = ours_with_heads(config, ("token_classifier",), seed=31)
    inputs = batch(config, seed=31)
    labels = torch.full_like(inputs["input_ids"], IGNORE_INDEX)
    labels[0, 1], labels[0, 5], labels[2, 3] = 2, 0, 1
    out = model(**inputs, token_labels=labels)
    logits = out.token_classifier.logits
    picked = torch.stack([logits[0, 1], logits[0, 5], logits[2, 3]])
    reference = F.cross_entropy(picked, torch.tensor([2, 0, 1]))
    check("token loss by definition", out.token_classifier.loss, reference, PATHS)
    assert torch.equal(out.loss, out.token_classifier.loss)
    # No labelled position: 0, still attached (transformers' CrossEntropyLoss gives NaN here).
    none = model(**inputs, token_labels=torch.full_like(labels, IGNORE_INDEX))
    assert none.loss.item() == 0.0
    none.loss.backward()
    assert bool((model.token_classifier.weight.grad == 0).all())


@pytest.mark.parametrize("head", ["token_classifier", "multiple_choice"])
def test_new_heads_use_classifier_dropout(head):
    """classifier_dropout applies before the classifier; None means hidden_dropout_prob (as transformers)."""
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     classifier_dropout=0.5)
    model = ours_with_heads(config, (head,), seed=32).train()
    inputs = batch(config, batch_size=4, seed=32)
    if head == "multiple_choice":
        inputs = {k: v.view(2, 2, -1) for k, v in inputs.items()}               # (4, S) -> (B=2, C=2, S)
    with torch.no_grad():
        a, b = model(**inputs), model(**inputs)
    assert torch.equal(a.encoder.last_hidden_state, b.encoder.last_hidden_state)
    assert not torch.allclose(getattr(a, head).logits, getattr(b, head).logits)
    fallback = BertWithHeads(config.replace(classifier_dropout=None, hidden_dropout_prob=0.25), (head,))
    assert fallback.dropout.p == 0.25


def test_choices_are_scored_one_row_each():
    """(B, C, S) logits are the head's score of each choice's pooled vector, run as a (B*C, S) batch."""
    config = CONFIGS["odd"]
    model = ours_with_heads(config, ("mlm", "multiple_choice"), seed=33)
    flat = batch(config, batch_size=6, seq_len=9, seed=33)
    inputs = {k: v.view(2, 3, 9) for k, v in flat.items()}                      # (6, S) -> (2, 3, S)
    labels = torch.tensor([2, 0])
    out = model(**inputs, choice_labels=labels)
    assert out.mlm is None and out.multiple_choice.logits.shape == (2, 3)
    with torch.no_grad():
        pooled = model(**flat, compute=()).encoder.pooler_output                # (6, H)
        scores = model.multiple_choice(pooled).view(2, 3)                       # (6, 1) -> (2, 3)
    check("choice logits by definition", out.multiple_choice.logits, scores, PATHS)
    check("choice loss by definition", out.loss, F.cross_entropy(scores, labels), PATHS)
    out.loss.backward()
    assert model.multiple_choice.weight.grad.abs().sum() > 0
    with torch.no_grad():
        plain = model(**flat)                                                   # (B, S): the other heads
    assert plain.multiple_choice is None and plain.mlm.logits.shape == (6, 9, config.vocab_size)


def test_choice_input_rules():
    config = CONFIGS["tiny"]
    flat = batch(config, batch_size=4, seed=34)
    choices = {k: v.view(2, 2, -1) for k, v in flat.items()}
    chooser = ours_with_heads(config, ("mlm", "multiple_choice"), seed=34)
    with torch.no_grad(), pytest.raises(ValueError, match=r"needs input_ids of shape \(B, C, S\)"):
        chooser(**flat, compute=("multiple_choice",))
    with torch.no_grad(), pytest.raises(ValueError, match=r"feed only the multiple-choice head; run mlm"):
        chooser(**choices, compute=("mlm", "multiple_choice"))
    with torch.no_grad(), pytest.raises(ValueError, match="this model has none"):
        ours_with_heads(config, ("mlm", "nsp"), seed=34)(**choices)
    with torch.no_grad():
        assert chooser(**choices, compute=()).multiple_choice is None      # the encoder alone, flattened
