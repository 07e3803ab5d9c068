"""The model against its definition: parity with `transformers` on the same weights, and the
properties DESIGN.md section 3 promises (two attention paths, padding, head_mask, sparse MLM,
tied decoder, init, heads, dropout).

Set BERT_TEST_DIFFS=1 and run with ``-s`` to print the largest difference of every comparison.
"""
from __future__ import annotations

import copy
import math
import os

import pytest
import torch
import torch.nn.functional as F
import transformers

from engine.config import SUPPORTED_ACTIVATIONS, BertConfig
from engine.heads import IGNORE_INDEX, BertWithHeads
from engine.model import BertModel
from reference import batch, hf_config, hf_copy, max_diff, randomize_

PARITY = 1e-5   # ours vs transformers, fp32
PATHS = 1e-6    # fast (SDPA) vs explicit attention, head_mask definition, sparse vs dense MLM

CONFIGS = {
    # Odd sizes: 3 heads of 16, intermediate not a multiple of anything, 7 layers, pad id not 0,
    # a third segment type and a large LayerNorm eps (a model that ignored the config's eps fails).
    "odd": BertConfig(vocab_size=997, hidden_size=48, num_attention_heads=3, intermediate_size=100,
                      num_hidden_layers=7, max_position_embeddings=40, type_vocab_size=3, pad_token_id=3,
                      layer_norm_eps=1e-3, id2label={0: "a", 1: "b", 2: "c"}),
    "tiny": BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=37),
    "gelu_new": BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                           intermediate_size=64, hidden_act="gelu_new", layer_norm_eps=0.5),
    "relu": BertConfig(vocab_size=120, hidden_size=24, num_hidden_layers=2, num_attention_heads=6,
                       intermediate_size=50, hidden_act="relu", max_position_embeddings=16),
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These tensors are tiny: one intra-op thread is faster, and immune to a busy machine
    (2 OpenMP threads spinning on a loaded 2-core box made this file 3x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def check(label: str, a: torch.Tensor, b: torch.Tensor, tol: float) -> float:
    diff = max_diff(a, b)
    if os.environ.get("BERT_TEST_DIFFS"):
        print(f"\n  {label}: max abs diff {diff:.3g}", end="")
    assert diff <= tol, f"{label}: max abs diff {diff:.3g} > {tol:g}"
    return diff


def ours_with_heads(config: BertConfig, heads, seed: int = 0, **kwargs) -> BertWithHeads:
    torch.manual_seed(seed)
    return randomize_(BertWithHeads(config, heads, **kwargs), seed).eval()


def mlm_labels(inputs: dict[str, torch.Tensor], vocab_size: int, seed: int = 1, rate: float = 0.15) -> torch.Tensor:
    """-100 everywhere except ~rate of the real tokens (at least one per row)."""
    generator = torch.Generator().manual_seed(seed)
    real = inputs["attention_mask"].bool()
    chosen = (torch.rand(real.shape, generator=generator) < rate) & real
    chosen[:, 1] = True
    labels = torch.randint(0, vocab_size, real.shape, generator=generator)
    return torch.where(chosen, labels, torch.full_like(labels, IGNORE_INDEX))


def compare_encoder(label: str, ours, theirs, hidden_layers: int) -> None:
    assert len(ours.hidden_states) == len(theirs.hidden_states) == hidden_layers + 1
    for i, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
        check(f"{label} hidden_states[{i}]", a, b, PARITY)
    assert len(ours.attentions) == len(theirs.attentions) == hidden_layers
    for i, (a, b) in enumerate(zip(ours.attentions, theirs.attentions)):
        check(f"{label} attentions[{i}]", a, b, PARITY)


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
    check(f"{act} MLM logits", a.prediction_logits, b.logits, PARITY)


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
    check(f"{name} prediction_logits", a.prediction_logits, b.prediction_logits, PARITY)
    check(f"{name} seq_relationship_logits", a.seq_relationship_logits, b.seq_relationship_logits, PARITY)
    compare_encoder(name, a, b, config.num_hidden_layers)
    check(f"{name} MLM+NSP loss", a.loss, b.loss, PARITY)
    check(f"{name} MLM+NSP loss (fast path)", fast.loss, b.loss, PARITY)
    check(f"{name} fast prediction_logits", fast.prediction_logits, b.prediction_logits, PARITY)
    mlm = F.cross_entropy(b.prediction_logits.view(-1, config.vocab_size), labels.view(-1))
    check(f"{name} MLM loss alone", a.mlm_loss, mlm, PARITY)
    check(f"{name} NSP loss alone", a.nsp_loss, F.cross_entropy(b.seq_relationship_logits, nsp), PARITY)


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
    check("hf->ours prediction_logits", a.prediction_logits, b.prediction_logits, PARITY)
    check("hf->ours seq_relationship_logits", a.seq_relationship_logits, b.seq_relationship_logits, PARITY)
    compare_encoder("hf->ours", a, b, config.num_hidden_layers)


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
    check(f"{name} MLM logits", a.prediction_logits, b.logits, PARITY)
    check(f"{name} MLM loss", a.loss, b.loss, PARITY)
    compare_encoder(name, a, b, config.num_hidden_layers)


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
    check(f"{name} start_logits", a.start_logits, b.start_logits, PARITY)
    check(f"{name} end_logits", a.end_logits, b.end_logits, PARITY)
    check(f"{name} QA loss", a.qa_loss, b.loss, PARITY)
    check(f"{name} QA loss (total)", a.loss, b.loss, PARITY)
    check(f"{name} QA loss (fast path)", fast.loss, b.loss, PARITY)
    compare_encoder(name, a, b, config.num_hidden_layers)


@pytest.mark.parametrize("name, num_labels", [("odd", 3), ("tiny", 2), ("relu", 1)])
def test_sequence_classification_parity(name, num_labels):
    config = CONFIGS[name].replace(id2label={i: f"L{i}" for i in range(num_labels)}, classifier_dropout=0.3)
    ours = ours_with_heads(config, ("cls",), seed=6)
    theirs = hf_copy(ours, transformers.BertForSequenceClassification)
    inputs = batch(config, seq_len=9, seed=6)
    if num_labels == 1:
        labels = torch.tensor([0.5, -1.0, 2.0])  # regression, as transformers
    else:
        labels = torch.tensor([0, num_labels - 1, 1])
    with torch.no_grad():
        a = ours(**inputs, class_labels=labels, output_attentions=True, output_hidden_states=True)
        b = theirs(**inputs, labels=labels, output_attentions=True, output_hidden_states=True)
    check(f"{name} classification logits", a.logits, b.logits, PARITY)
    check(f"{name} classification loss", a.classification_loss, b.loss, PARITY)
    check(f"{name} classification loss (total)", a.loss, b.loss, PARITY)
    check(f"{name} pooler", a.pooler_output, torch.tanh(theirs.bert.pooler.dense(b.hidden_states[-1][:, 0])), PARITY)
    compare_encoder(name, a, b, config.num_hidden_layers)


# ---- the two attention paths ------------------------------------------------------------

def path_outputs(model, inputs, head_mask):
    fast = model(**inputs, head_mask=head_mask)
    explicit = model(**inputs, head_mask=head_mask, output_attentions=True)
    probing = model(**inputs, head_mask=head_mask, output_qk=True)
    return fast, explicit, probing


def some_head_mask(config: BertConfig) -> torch.Tensor:
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[0, 1] = 0.0
    head_mask[-1, 0] = 0.0
    return head_mask


@pytest.mark.parametrize("padded", [True, False])
def test_fast_and_explicit_paths_agree(padded):
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=7)
    inputs = batch(config, seed=7, lengths=None if padded else (11, 11, 11))
    assert bool((inputs["attention_mask"] == 0).any()) == padded
    with torch.no_grad():
        for hm in (None, some_head_mask(config)):
            fast, explicit, probing = path_outputs(model, inputs, hm)
            tag = f"tiny padded={padded} head_mask={hm is not None}"
            check(f"{tag} fast vs explicit", fast.last_hidden_state, explicit.last_hidden_state, PATHS)
            check(f"{tag} fast vs output_qk", fast.last_hidden_state, probing.last_hidden_state, PATHS)
            check(f"{tag} fast vs explicit pooled", fast.pooler_output, explicit.pooler_output, PATHS)
    assert fast.attentions is None and fast.queries is None
    assert explicit.queries is None and explicit.attention_scores is None
    assert probing.attentions is None


@pytest.mark.parametrize("padded", [True, False])
def test_fast_and_explicit_paths_agree_per_layer_in_a_deep_model(padded):
    """7 layers. The paths differ only inside self-attention: given the same layer input, the
    attention context agrees to 1e-6 in every layer.

    After the output projection and LayerNorm the values are O(3), where one float32 ulp is
    2.4e-7, and each path alone is up to ~1.5e-6 away from a float64 computation of the same
    model (measured); so layer outputs and the 7-layer end-to-end result are held to 4e-6 in
    float32, and float64 shows the two paths compute the same function (1e-12).
    """
    config = CONFIGS["odd"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=7)
    inputs = batch(config, seed=7, lengths=None if padded else (11, 11, 11))
    from engine.model import additive_attention_mask
    with torch.no_grad():
        for hm in (None, some_head_mask(config)):
            tag = f"odd padded={padded} head_mask={hm is not None}"
            reference = model(**inputs, head_mask=hm, output_hidden_states=True)
            mask = additive_attention_mask(inputs["attention_mask"], torch.float32)
            for index, layer in enumerate(model.bert.encoder.layer):
                layer_hm = None if hm is None else hm[index]
                layer_input = reference.hidden_states[index]
                fast, _ = layer.attention.self(layer_input, mask, layer_hm, explicit=False)
                explicit, _ = layer.attention.self(layer_input, mask, layer_hm, explicit=True)
                check(f"{tag} layer {index} attention context fast vs explicit", fast, explicit, PATHS)
                fast, _ = layer(layer_input, mask, layer_hm, explicit=False)
                explicit, _ = layer(layer_input, mask, layer_hm, explicit=True)
                check(f"{tag} layer {index} output fast vs explicit", fast, explicit, 4 * PATHS)
            fast, explicit, probing = path_outputs(model, inputs, hm)
            check(f"{tag} fp32 end to end", fast.last_hidden_state, explicit.last_hidden_state, 4 * PATHS)
            check(f"{tag} fp32 end to end (qk)", fast.last_hidden_state, probing.last_hidden_state, 4 * PATHS)
            fast, explicit, probing = path_outputs(copy.deepcopy(model).double(), inputs, hm)
            check(f"{tag} fp64 end to end", fast.last_hidden_state, explicit.last_hidden_state, 1e-12)
            check(f"{tag} fp64 end to end pooled", fast.pooler_output, explicit.pooler_output, 1e-12)


def test_probing_outputs_are_consistent():
    """queries/keys/scores from output_qk are what the probabilities were computed from."""
    config = CONFIGS["odd"]
    model = ours_with_heads(config, (), seed=8)
    inputs = batch(config, seed=8)
    with torch.no_grad():
        out = model(**inputs, output_qk=True, output_attentions=True)
    pad = inputs["attention_mask"] == 0                                    # (B, S)
    for layer in range(config.num_hidden_layers):
        q, k, scores = out.queries[layer], out.keys[layer], out.attention_scores[layer]
        assert q.shape == k.shape == (3, config.num_attention_heads, 11, config.head_size)
        raw = q @ k.transpose(-1, -2) / math.sqrt(config.head_size)        # (B, nh, S, S)
        real = ~pad[:, None, None, :].expand_as(raw)
        check(f"scores layer {layer}", scores[real], raw[real], PATHS)
        assert bool((scores[~real] < -1e30).all())
        check(f"softmax(scores) layer {layer}", torch.softmax(scores, -1), out.attentions[layer], PATHS)


# ---- padding ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["odd", "tiny"])
@pytest.mark.parametrize("explicit", [False, True])
def test_padding_invariance(name, explicit):
    config = CONFIGS[name]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=9)
    inputs = batch(config, seed=9, lengths=(11, 8, 5))
    with torch.no_grad():
        padded = model(**inputs, output_hidden_states=True, output_attentions=explicit)
        for row, length in enumerate((11, 8, 5)):
            alone_inputs = {k: v[row:row + 1, :length] for k, v in inputs.items()}
            for mask in (alone_inputs["attention_mask"], None):
                alone = model(input_ids=alone_inputs["input_ids"], token_type_ids=alone_inputs["token_type_ids"],
                              attention_mask=mask, output_hidden_states=True, output_attentions=explicit)
                tag = f"{name} explicit={explicit} row {row}"
                for i, (a, b) in enumerate(zip(padded.hidden_states, alone.hidden_states)):
                    check(f"{tag} hidden_states[{i}]", a[row, :length], b[0], PARITY)
                check(f"{tag} pooled", padded.pooler_output[row], alone.pooler_output[0], PARITY)
                check(f"{tag} MLM logits", padded.prediction_logits[row, :length], alone.prediction_logits[0], PARITY)
                check(f"{tag} NSP logits", padded.seq_relationship_logits[row], alone.seq_relationship_logits[0],
                      PARITY)
                if explicit:
                    for i, (a, b) in enumerate(zip(padded.attentions, alone.attentions)):
                        check(f"{tag} attentions[{i}]", a[row, :, :length, :length], b[0], PARITY)


@pytest.mark.parametrize("name", ["odd", "tiny"])
def test_attention_rows_sum_to_one_and_padded_keys_get_nothing(name):
    config = CONFIGS[name]
    model = ours_with_heads(config, ("mlm",), seed=10)
    inputs = batch(config, seed=10, lengths=(11, 7, 2))
    pad = inputs["attention_mask"] == 0
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    for layer, probs in enumerate(out.attentions):
        assert probs.shape == (3, config.num_attention_heads, 11, 11)
        check(f"{name} row sums layer {layer}", probs.sum(-1), torch.ones(probs.shape[:-1]), PATHS)
        assert bool((probs >= 0).all())
        to_padding = probs.masked_select(pad[:, None, None, :].expand_as(probs))
        assert to_padding.numel() > 0 and to_padding.max().item() < 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_padding_mask(dtype):
    """The additive mask uses the dtype's minimum: no NaN/inf and padded keys still get nothing."""
    config = CONFIGS["tiny"]
    model = ours_with_heads(config, ("mlm",), seed=11).to(dtype)
    inputs = batch(config, seed=11, lengths=(11, 4, 1))
    with torch.no_grad():
        explicit = model(**inputs, output_attentions=True)
        fast = model(**inputs)
    pad = inputs["attention_mask"] == 0
    for probs in explicit.attentions:
        assert probs.dtype == dtype
        assert bool(torch.isfinite(probs).all())
        assert probs.masked_select(pad[:, None, None, :].expand_as(probs)).abs().max().item() == 0.0
    assert bool(torch.isfinite(fast.prediction_logits).all())
    assert bool(torch.isfinite(explicit.prediction_logits).all())


# ---- head_mask -----------------------------------------------------------------------

def without_heads(model: BertWithHeads, head_mask: torch.Tensor) -> BertWithHeads:
    """A copy in which head h of layer l is scaled by head_mask[l, h] through the output projection.

    A head's context occupies input columns h*hd:(h+1)*hd of attention.output.dense, so
    scaling those columns is exactly scaling the head's contribution.
    """
    clone = copy.deepcopy(model)
    hd = model.config.head_size
    with torch.no_grad():
        for layer, row in zip(clone.bert.encoder.layer, head_mask):
            for h, value in enumerate(row.tolist()):
                layer.attention.output.dense.weight[:, h * hd:(h + 1) * hd] *= value
    return clone


@pytest.mark.parametrize("name", ["odd", "tiny"])
@pytest.mark.parametrize("shape", ["heads", "layers x heads", "list", "fractional"])
@pytest.mark.parametrize("explicit", [False, True])
def test_head_mask_by_definition(name, shape, explicit):
    config = CONFIGS[name]
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    model = ours_with_heads(config, ("mlm", "nsp"), seed=12)
    generator = torch.Generator().manual_seed(12)
    if shape in ("heads", "list"):
        given = torch.ones(heads)
        given[1] = 0.0
        full = given.expand(layers, heads)
        if shape == "list":
            given = given.tolist()
    else:
        full = (torch.rand(layers, heads, generator=generator) < 0.6).float()
        full[0] = 0.0  # a whole layer without attention
        if shape == "fractional":
            full[-1, 0] = 0.5
        given = full
    reference = without_heads(model, full)
    inputs = batch(config, seed=12)
    with torch.no_grad():
        out = model(**inputs, head_mask=given, output_attentions=explicit, output_hidden_states=True)
        expected = reference(**inputs, output_hidden_states=True, output_attentions=explicit)
    tag = f"{name} {shape} explicit={explicit}"
    for i, (a, b) in enumerate(zip(out.hidden_states, expected.hidden_states)):
        check(f"{tag} hidden_states[{i}]", a, b, PATHS)
    check(f"{tag} pooled", out.pooler_output, expected.pooler_output, PATHS)
    check(f"{tag} MLM logits", out.prediction_logits, expected.prediction_logits, 10 * PATHS)
    if explicit:
        # The reported probabilities are the masked ones, as in the original. The reference
        # sees the same layer inputs, and its probabilities are unmasked.
        for layer, (probs, unmasked) in enumerate(zip(out.attentions, expected.attentions)):
            scale = full[layer].view(1, heads, 1, 1)
            check(f"{tag} masked probs layer {layer}", probs, unmasked * scale, PATHS)


def test_all_ones_head_mask_changes_nothing():
    config = CONFIGS["odd"]
    model = ours_with_heads(config, ("mlm", "nsp"), seed=13)
    inputs = batch(config, seed=13)
    with torch.no_grad():
        for explicit in (False, True):
            a = model(**inputs, output_attentions=explicit)
            b = model(**inputs, head_mask=torch.ones(config.num_attention_heads), output_attentions=explicit)
            assert torch.equal(a.last_hidden_state, b.last_hidden_state)


@pytest.mark.parametrize("shape", [(4,), (2,), (1, 3), (8, 3), (7, 3, 1), (21,), ()])
def test_head_mask_wrong_shape(shape):
    config = CONFIGS["odd"]  # 7 layers, 3 heads
    model = ours_with_heads(config, ("mlm",), seed=14)
    inputs = batch(config, seed=14)
    for explicit in (False, True):
        with pytest.raises(ValueError, match="head_mask"):
            model(**inputs, head_mask=torch.ones(shape), output_attentions=explicit)


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

def assert_tied(model: BertWithHeads) -> None:
    decoder = model.cls.predictions.decoder.weight
    embeddings = model.bert.embeddings.word_embeddings.weight
    assert decoder is embeddings
    assert decoder.data_ptr() == embeddings.data_ptr()


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


# ---- initialisation ----------------------------------------------------------------------

def test_init():
    std = 0.05
    config = BertConfig(vocab_size=300, hidden_size=256, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=256, initializer_range=std, pad_token_id=7,
                        id2label={0: "a", 1: "b", 2: "c"})
    torch.manual_seed(19)
    model = BertWithHeads(config, ("mlm", "nsp", "qa", "cls"))
    layer = model.bert.encoder.layer[0]
    big = {
        "query": layer.attention.self.query.weight, "key": layer.attention.self.key.weight,
        "value": layer.attention.self.value.weight, "attention output": layer.attention.output.dense.weight,
        "intermediate": layer.intermediate.dense.weight, "output": layer.output.dense.weight,
        "pooler": model.bert.pooler.dense.weight, "mlm transform": model.cls.predictions.transform.dense.weight,
        "positions": model.bert.embeddings.position_embeddings.weight,
        "words (without pad row)": torch.cat([model.bert.embeddings.word_embeddings.weight[:7],
                                              model.bert.embeddings.word_embeddings.weight[8:]]),
    }
    for name, weight in big.items():
        assert weight.numel() >= 256 * 256, name
        assert abs(weight.std().item() - std) < 0.1 * std, name
        assert abs(weight.mean().item()) < 0.1 * std, name
    small = {"qa": model.qa_outputs.weight, "classifier": model.classifier.weight,
             "nsp": model.cls.seq_relationship.weight, "segments": model.bert.embeddings.token_type_embeddings.weight}
    for name, weight in small.items():
        assert abs(weight.std().item() - std) < 0.25 * std, name
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            assert bool((module.bias == 0).all()), name
        if isinstance(module, torch.nn.LayerNorm):
            assert bool((module.weight == 1).all()) and bool((module.bias == 0).all()), name
    assert bool((model.bert.embeddings.word_embeddings.weight[7] == 0).all())
    assert bool((model.cls.predictions.bias == 0).all())
    assert_tied(model)
    # A different initializer_range is honoured.
    wide = BertWithHeads(config.replace(initializer_range=0.2), ("mlm",))
    assert abs(wide.bert.encoder.layer[0].attention.self.query.weight.std().item() - 0.2) < 0.02


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


# ---- dropout ----------------------------------------------------------------------------

@pytest.mark.parametrize("explicit", [False, True])
def test_dropout_off_in_eval_on_in_train(explicit):
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                                     classifier_dropout=0.2)
    model = ours_with_heads(config, ("mlm", "nsp", "qa", "cls"), seed=23)
    inputs = batch(config, seed=23)
    with torch.no_grad():
        a, b = model(**inputs, output_attentions=explicit), model(**inputs, output_attentions=explicit)
        for field in ("last_hidden_state", "pooler_output", "prediction_logits", "logits", "start_logits"):
            assert torch.equal(getattr(a, field), getattr(b, field)), field
        model.train()
        c, d = model(**inputs, output_attentions=explicit), model(**inputs, output_attentions=explicit)
    for field in ("last_hidden_state", "logits"):
        assert not torch.allclose(getattr(c, field), getattr(d, field)), field
        assert not torch.allclose(getattr(a, field), getattr(c, field)), field


@pytest.mark.parametrize("explicit", [False, True])
def test_attention_dropout_alone_is_applied_in_train(explicit):
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.3)
    model = ours_with_heads(config, ("mlm",), seed=24).train()
    inputs = batch(config, seed=24)
    with torch.no_grad():
        a, b = model(**inputs, output_attentions=explicit), model(**inputs, output_attentions=explicit)
    assert not torch.allclose(a.last_hidden_state, b.last_hidden_state)


def test_train_mode_without_dropout_equals_eval():
    config = CONFIGS["odd"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = ours_with_heads(config, ("mlm", "nsp"), seed=25)
    inputs = batch(config, seed=25)
    with torch.no_grad():
        for explicit in (False, True):
            model.eval()
            evaluated = model(**inputs, output_attentions=explicit).last_hidden_state
            model.train()
            trained = model(**inputs, output_attentions=explicit).last_hidden_state
            check(f"train without dropout explicit={explicit}", trained, evaluated, PATHS)


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


def test_fused_qkv_inference_equals_separate_projections_and_follows_weight_updates():
    """Inference fuses Q/K/V into one GEMM with a cached weight; it must track every weight change."""
    from engine import BertWithHeads, preset

    torch.manual_seed(0)
    model = BertWithHeads(preset("tiny", vocab_size=120, hidden_size=32, num_attention_heads=4,
                                 intermediate_size=37), heads=("mlm",)).eval()
    ids = torch.randint(5, 120, (2, 11))
    with torch.no_grad():
        fused = model(ids).prediction_logits
    separate = model(ids).prediction_logits.detach()  # grad enabled: three projections
    assert (fused - separate).abs().max() <= 1e-5

    # An optimizer step changes the weights in place: the cached fused weight must not go stale.
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    model.eval()
    with torch.inference_mode():
        after_step = model(ids).prediction_logits
    assert (after_step - model(ids).prediction_logits.detach()).abs().max() <= 1e-5
    assert (after_step - fused).abs().max() > 1e-3

    # So must load_state_dict (checkpoint switch while the app is serving).
    other = BertWithHeads(model.config, heads=("mlm",)).eval()
    model.load_state_dict(other.state_dict())
    with torch.no_grad():
        assert (model(ids).prediction_logits - other(ids).prediction_logits).abs().max() <= 1e-5
