"""Parity with `transformers` on the same random weights: encoder, pretraining, MLM, QA,
sequence classification, token classification and multiple-choice outputs and losses, fp32,
padded batches.

Set BERT_TEST_DIFFS=1 and run with ``-s`` to print the largest difference of every comparison.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers

from engine.checkpoints.key_mapping import normalise_keys
from engine.model.config import SUPPORTED_ACTIVATIONS, BertConfig
from engine.model.heads import IGNORE_INDEX, BertWithHeads
from engine.model.encoder import BertModel
from support.reference import (
    CONFIGS, PARITY, batch, check, compare_encoder, hf_config, hf_copy, mlm_labels, ours_with_heads,
    randomize_,
)

pytestmark = pytest.mark.usefixtures("one_thread")



# ---- parity with transformers ---------------------------------------------------------

@pytest.mark.parametrize("name", list(CONFIGS))
def test_encoder_parity(name):
    config = CONFIGS[name]
    torch.manual_seed(0)
    ours = randomize_(BertModel(config), 0).eval()
    theirs = hf_copy(ours, transformers.BertModel)
    inputs = batch(config)
    with torch.no_grad():
        a = ours(**inputs, output_hidden_states=True, output_attentions=True)
        b = theirs(**inputs, output_hidden_states=True, output_attentions=True)
        fast = ours(**inputs)
        sdpa = hf_copy(ours, transformers.BertModel, attn_implementation="sdpa")(**inputs)
    check(f"{name} last_hidden_state", a.last_hidden_state, b.last_hidden_state, PARITY)
    check(f"{name} pooler_output", a.pooler_output, b.pooler_output, PARITY)
    compare_encoder(name, a, b, config.num_hidden_layers)
    check(f"{name} fast path vs transformers eager", fast.last_hidden_state, b.last_hidden_state, PARITY)
    check(f"{name} fast path vs transformers sdpa", fast.last_hidden_state, sdpa.last_hidden_state, PARITY)
    check(f"{name} fast pooler vs transformers sdpa", fast.pooler_output, sdpa.pooler_output, PARITY)


@pytest.mark.parametrize("act", SUPPORTED_ACTIVATIONS)
def test_every_activation_matches_transformers(act):
    config = CONFIGS["tiny"].replace(hidden_act=act)
    ours = ours_with_heads(config, ("mlm",), seed=3)
    theirs = hf_copy(ours, transformers.BertForMaskedLM)
    inputs = batch(config, seed=3)
    with torch.no_grad():
        a, b = ours(**inputs), theirs(**inputs)
    check(f"{act} MLM logits", a.mlm.logits, b.logits, PARITY)


@pytest.mark.parametrize("name", ["odd", "tiny", "gelu_new"])
def test_pretraining_parity(name):
    config = CONFIGS[name]
    ours = ours_with_heads(config, ("mlm", "nsp"), seed=1)
    theirs = hf_copy(ours, transformers.BertForPreTraining)
    inputs = batch(config, seed=1)
    labels = mlm_labels(inputs, config.vocab_size)
    nsp = torch.tensor([0, 1, 1])
    with torch.no_grad():
        a = ours(**inputs, labels=labels, next_sentence_label=nsp, output_hidden_states=True,
                 output_attentions=True)
        b = theirs(**inputs, labels=labels, next_sentence_label=nsp, output_hidden_states=True,
                   output_attentions=True)
        fast = ours(**inputs, labels=labels, next_sentence_label=nsp)
    check(f"{name} prediction_logits", a.mlm.logits, b.prediction_logits, PARITY)
    check(f"{name} seq_relationship_logits", a.nsp.logits, b.seq_relationship_logits, PARITY)
    compare_encoder(name, a.encoder, b, config.num_hidden_layers)
    check(f"{name} MLM+NSP loss", a.loss, b.loss, PARITY)
    check(f"{name} MLM+NSP loss (fast path)", fast.loss, b.loss, PARITY)
    check(f"{name} fast prediction_logits", fast.mlm.logits, b.prediction_logits, PARITY)
    mlm = F.cross_entropy(b.prediction_logits.view(-1, config.vocab_size), labels.view(-1))
    check(f"{name} MLM loss alone", a.mlm.loss, mlm, PARITY)
    check(f"{name} NSP loss alone", a.nsp.loss, F.cross_entropy(b.seq_relationship_logits, nsp), PARITY)


def test_transformers_weights_load_into_ours():
    """The other direction: a transformers state dict (random values) into our model."""
    config = CONFIGS["odd"]
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config(config))
    randomize_(hf, 5).eval()
    ours = BertWithHeads(config, ("mlm", "nsp")).eval()
    result = ours.load_state_dict(hf.state_dict(), strict=False)
    assert result.missing_keys == []
    assert result.unexpected_keys == ["cls.predictions.decoder.bias"]  # transformers' alias of cls.predictions.bias
    assert ours.cls.predictions.decoder.weight is ours.bert.embeddings.word_embeddings.weight
    inputs = batch(config, seed=5)
    with torch.no_grad():
        a = ours(**inputs, output_attentions=True, output_hidden_states=True)
        b = hf(**inputs, output_attentions=True, output_hidden_states=True)
    check("hf->ours prediction_logits", a.mlm.logits, b.prediction_logits, PARITY)
    check("hf->ours seq_relationship_logits", a.nsp.logits, b.seq_relationship_logits, PARITY)
    compare_encoder("hf->ours", a.encoder, b, config.num_hidden_layers)


@pytest.mark.parametrize("name", ["odd", "tiny", "relu"])
def test_masked_lm_parity(name):
    config = CONFIGS[name]
    ours = ours_with_heads(config, ("mlm",), seed=2)
    assert not ours.has_pooler  # as transformers.BertForMaskedLM
    theirs = hf_copy(ours, transformers.BertForMaskedLM)
    inputs = batch(config, seq_len=9, seed=2)
    labels = mlm_labels(inputs, config.vocab_size, seed=2)
    with torch.no_grad():
        a = ours(**inputs, labels=labels, output_attentions=True, output_hidden_states=True)
        b = theirs(**inputs, labels=labels, output_attentions=True, output_hidden_states=True)
    check(f"{name} MLM logits", a.mlm.logits, b.logits, PARITY)
    check(f"{name} MLM loss", a.loss, b.loss, PARITY)
    compare_encoder(name, a.encoder, b, config.num_hidden_layers)


@pytest.mark.parametrize("name", ["odd", "tiny", "gelu_new"])
def test_question_answering_parity(name):
    config = CONFIGS[name].replace(id2label={0: "LABEL_0", 1: "LABEL_1"})  # transformers' QA head has num_labels outputs
    ours = ours_with_heads(config, ("qa",), seed=4)
    assert not ours.has_pooler  # as transformers.BertForQuestionAnswering
    theirs = hf_copy(ours, transformers.BertForQuestionAnswering)
    inputs = batch(config, seed=4)
    seq_len = inputs["input_ids"].shape[1]
    start = torch.tensor([2, 0, seq_len + 5])   # the last is out of range: clamped and ignored
    end = torch.tensor([4, seq_len - 1, 1])
    with torch.no_grad():
        a = ours(**inputs, start_positions=start, end_positions=end, output_attentions=True,
                 output_hidden_states=True)
        b = theirs(**inputs, start_positions=start, end_positions=end, output_attentions=True,
                   output_hidden_states=True)
        fast = ours(**inputs, start_positions=start, end_positions=end)
    check(f"{name} start_logits", a.qa.start_logits, b.start_logits, PARITY)
    check(f"{name} end_logits", a.qa.end_logits, b.end_logits, PARITY)
    check(f"{name} QA loss", a.qa.loss, b.loss, PARITY)
    check(f"{name} QA loss (total)", a.loss, b.loss, PARITY)
    check(f"{name} QA loss (fast path)", fast.loss, b.loss, PARITY)
    compare_encoder(name, a.encoder, b, config.num_hidden_layers)


@pytest.mark.parametrize("name, num_labels", [("odd", 3), ("tiny", 2), ("relu", 1)])
def test_sequence_classification_parity(name, num_labels):
    config = CONFIGS[name].replace(id2label={i: f"L{i}" for i in range(num_labels)}, classifier_dropout=0.3)
    ours = ours_with_heads(config, ("classifier",), seed=6)
    theirs = hf_copy(ours, transformers.BertForSequenceClassification)
    inputs = batch(config, seq_len=9, seed=6)
    if num_labels == 1:
        labels = torch.tensor([0.5, -1.0, 2.0])  # regression, as transformers
    else:
        labels = torch.tensor([0, num_labels - 1, 1])
    with torch.no_grad():
        a = ours(**inputs, class_labels=labels, output_attentions=True, output_hidden_states=True)
        b = theirs(**inputs, labels=labels, output_attentions=True, output_hidden_states=True)
    check(f"{name} classification logits", a.classifier.logits, b.logits, PARITY)
    check(f"{name} classification loss", a.classifier.loss, b.loss, PARITY)
    check(f"{name} classification loss (total)", a.loss, b.loss, PARITY)
    pooled = torch.tanh(theirs.bert.pooler.dense(b.hidden_states[-1][:, 0]))     # (B, H)
    check(f"{name} pooler", a.encoder.pooler_output, pooled, PARITY)
    compare_encoder(name, a.encoder, b, config.num_hidden_layers)


# hidden 36 in 3 heads of 12, intermediate 50, pad id 1: sizes no kernel is tuned for.
ODD36 = BertConfig(vocab_size=211, hidden_size=36, num_attention_heads=3, intermediate_size=50, num_hidden_layers=2,
                   max_position_embeddings=24, pad_token_id=1, classifier_dropout=0.2)


def token_labels(inputs: dict[str, torch.Tensor], num_labels: int, seed: int) -> torch.Tensor:
    """A label at every real token but a few; -100 at padding and at the skipped ones (as sub-word pieces)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, num_labels, inputs["input_ids"].shape, generator=generator)
    skipped = torch.rand(labels.shape, generator=generator) < 0.3
    skipped |= inputs["attention_mask"] == 0
    skipped[:, 0] = True                                                  # [CLS] unlabelled, as in NER data
    return labels.masked_fill(skipped, IGNORE_INDEX)


@pytest.mark.parametrize("name, num_labels", [("odd", 5), ("tiny", 2), ("odd36", 1), ("relu", 9)])
def test_token_classification_parity(name, num_labels):
    config = (ODD36 if name == "odd36" else CONFIGS[name]).replace(id2label={i: f"T{i}" for i in range(num_labels)})
    ours = ours_with_heads(config, ("token_classifier",), seed=7)
    assert not ours.has_pooler  # as transformers.BertForTokenClassification
    theirs = hf_copy(ours, transformers.BertForTokenClassification)
    inputs = batch(config, batch_size=4, seq_len=10, seed=7)
    labels = token_labels(inputs, num_labels, seed=7)
    assert (labels == IGNORE_INDEX).any() and (labels != IGNORE_INDEX).any()
    with torch.no_grad():
        a = ours(**inputs, token_labels=labels, output_attentions=True, output_hidden_states=True)
        b = theirs(**inputs, labels=labels, output_attentions=True, output_hidden_states=True)
        fast = ours(**inputs, token_labels=labels)
    assert a.token_classifier.logits.shape == (4, 10, num_labels)
    check(f"{name} token logits", a.token_classifier.logits, b.logits, PARITY)
    check(f"{name} token loss", a.token_classifier.loss, b.loss, PARITY)
    check(f"{name} token loss (total)", a.loss, b.loss, PARITY)
    check(f"{name} token logits (fast path)", fast.token_classifier.logits, b.logits, PARITY)
    check(f"{name} token loss (fast path)", fast.loss, b.loss, PARITY)
    compare_encoder(name, a.encoder, b, config.num_hidden_layers)


def choice_inputs(config: BertConfig, batch_size: int, choices: int, seq_len: int, seed: int,
                  positions: bool = False) -> dict[str, torch.Tensor]:
    """(B, C, S) inputs: each choice row padded to its own length; random position ids on request."""
    flat = batch(config, batch_size=batch_size * choices, seq_len=seq_len, seed=seed)
    inputs = {k: v.view(batch_size, choices, seq_len) for k, v in flat.items()}     # (B*C, S) -> (B, C, S)
    if positions:
        generator = torch.Generator().manual_seed(seed)
        inputs["position_ids"] = torch.randint(0, config.max_position_embeddings, (batch_size, choices, seq_len),
                                               generator=generator)
    return inputs


@pytest.mark.parametrize("name, shape, positions", [
    ("odd", (2, 4, 9), False), ("tiny", (3, 2, 11), True), ("odd36", (1, 5, 7), True), ("gelu_new", (4, 3, 6), False),
])
def test_multiple_choice_parity(name, shape, positions):
    config = ODD36 if name == "odd36" else CONFIGS[name]
    batch_size, choices, seq_len = shape
    ours = ours_with_heads(config, ("multiple_choice",), seed=8)
    theirs = hf_copy(ours, transformers.BertForMultipleChoice)
    inputs = choice_inputs(config, batch_size, choices, seq_len, seed=8, positions=positions)
    labels = torch.arange(batch_size) % choices
    with torch.no_grad():
        a = ours(**inputs, choice_labels=labels, output_attentions=True, output_hidden_states=True)
        b = theirs(**inputs, labels=labels, output_attentions=True, output_hidden_states=True)
        fast = ours(**inputs, choice_labels=labels)
    assert a.multiple_choice.logits.shape == (batch_size, choices)
    check(f"{name} choice logits", a.multiple_choice.logits, b.logits, PARITY)
    check(f"{name} choice loss", a.multiple_choice.loss, b.loss, PARITY)
    check(f"{name} choice loss (total)", a.loss, b.loss, PARITY)
    check(f"{name} choice logits (fast path)", fast.multiple_choice.logits, b.logits, PARITY)
    check(f"{name} choice loss (fast path)", fast.loss, b.loss, PARITY)
    assert a.encoder.last_hidden_state.shape == (batch_size * choices, seq_len, config.hidden_size)
    compare_encoder(name, a.encoder, b, config.num_hidden_layers)


@pytest.mark.parametrize("hf_class, head", [("BertForTokenClassification", "token_classifier"),
                                            ("BertForMultipleChoice", "multiple_choice")])
def test_transformers_classifier_weights_load_into_ours(hf_class, head):
    """The other direction: transformers' ``classifier.*`` (random values) is our head of the class named."""
    config = ODD36.replace(id2label={i: f"T{i}" for i in range(4)})
    torch.manual_seed(0)
    hf = randomize_(getattr(transformers, hf_class)(hf_config(config)), 9).eval()
    state, ignored = normalise_keys(hf.state_dict(), [hf_class])
    ours = BertWithHeads(config, (head,)).eval()
    ours.load_state_dict(state)                                      # strict: nothing missing or unexpected
    assert ignored == [] and not hasattr(ours, "classifier")
    inputs = batch(config, batch_size=6, seq_len=8, seed=9)
    if head == "multiple_choice":
        inputs = {k: v.view(2, 3, 8) for k, v in inputs.items()}    # (6, S) -> (B=2, C=3, S)
    with torch.no_grad():
        a, b = ours(**inputs), hf(**inputs)
    check(f"hf->ours {head} logits", getattr(a, head).logits, b.logits, PARITY)
