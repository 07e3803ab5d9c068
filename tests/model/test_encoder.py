"""The encoder against its definition: the two attention paths, padding,
head_mask, initialisation and dropout (the inference caches: test_inference_cache.py).

Set BERT_TEST_DIFFS=1 and run with ``-s`` to print the largest difference of every comparison.
"""
from __future__ import annotations

import copy
import math

import pytest
import torch

from engine.model.config import BertConfig
from engine.model.heads import BertWithHeads
from support.reference import (
    CONFIGS, PARITY, PATHS, assert_tied, batch, check, ours_with_heads,
)

pytestmark = pytest.mark.usefixtures("one_thread")



# ---- the two attention paths ------------------------------------------------------------

def path_outputs(model, inputs, head_mask):
    """The encoder outputs of the fast path, the explicit path and the explicit path with queries/keys."""
    fast = model(**inputs, head_mask=head_mask)
    explicit = model(**inputs, head_mask=head_mask, output_attentions=True)
    probing = model(**inputs, head_mask=head_mask, output_qk=True)
    return fast.encoder, explicit.encoder, probing.encoder


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
    from engine.model.encoder import additive_attention_mask
    with torch.no_grad():
        for hm in (None, some_head_mask(config)):
            tag = f"odd padded={padded} head_mask={hm is not None}"
            reference = model(**inputs, head_mask=hm, output_hidden_states=True)
            mask = additive_attention_mask(inputs["attention_mask"], torch.float32)
            for index, layer in enumerate(model.bert.encoder.layer):
                layer_hm = None if hm is None else hm[index]
                layer_input = reference.encoder.hidden_states[index]
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
        q, k, scores = out.encoder.queries[layer], out.encoder.keys[layer], out.encoder.attention_scores[layer]
        assert q.shape == k.shape == (3, config.num_attention_heads, 11, config.head_size)
        raw = q @ k.transpose(-1, -2) / math.sqrt(config.head_size)        # (B, nh, S, S)
        real = ~pad[:, None, None, :].expand_as(raw)
        check(f"scores layer {layer}", scores[real], raw[real], PATHS)
        assert bool((scores[~real] < -1e30).all())
        check(f"softmax(scores) layer {layer}", torch.softmax(scores, -1), out.encoder.attentions[layer], PATHS)


def test_on_layer_hands_over_each_layers_probes_instead_of_collecting_them():
    """``on_layer`` sees every layer's probes, equal to the collected outputs, as the layers make them; the
    outputs' tuples are then empty (nothing held across layers) and the hidden states unchanged."""
    config = CONFIGS["odd"]
    model = ours_with_heads(config, (), seed=9)
    inputs = batch(config, seed=9)
    seen: list[tuple[int, dict[str, torch.Tensor]]] = []
    with torch.no_grad():
        collected = model.bert(**inputs, output_qk=True, output_attentions=True)
        handed = model.bert(**inputs, output_qk=True, output_attentions=True,
                            on_layer=lambda index, probes: seen.append((index, dict(probes))))
    assert [index for index, _ in seen] == list(range(config.num_hidden_layers))
    for index, probes in seen:
        assert torch.equal(probes["probs"], collected.attentions[index])
        assert torch.equal(probes["queries"], collected.queries[index])
        assert torch.equal(probes["keys"], collected.keys[index])
    assert handed.attentions == handed.queries == handed.keys == handed.attention_scores == ()
    assert torch.equal(handed.last_hidden_state, collected.last_hidden_state)
    only_maps = model.bert(**inputs, output_attentions=True)
    assert only_maps.attention_scores is None and len(only_maps.attentions) == config.num_hidden_layers


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
                for i, (a, b) in enumerate(zip(padded.encoder.hidden_states, alone.encoder.hidden_states)):
                    check(f"{tag} hidden_states[{i}]", a[row, :length], b[0], PARITY)
                check(f"{tag} pooled", padded.encoder.pooler_output[row], alone.encoder.pooler_output[0], PARITY)
                check(f"{tag} MLM logits", padded.mlm.logits[row, :length], alone.mlm.logits[0], PARITY)
                check(f"{tag} NSP logits", padded.nsp.logits[row], alone.nsp.logits[0],
                      PARITY)
                if explicit:
                    for i, (a, b) in enumerate(zip(padded.encoder.attentions, alone.encoder.attentions)):
                        check(f"{tag} attentions[{i}]", a[row, :, :length, :length], b[0], PARITY)


@pytest.mark.parametrize("name", ["odd", "tiny"])
def test_attention_rows_sum_to_one_and_padded_keys_get_nothing(name):
    config = CONFIGS[name]
    model = ours_with_heads(config, ("mlm",), seed=10)
    inputs = batch(config, seed=10, lengths=(11, 7, 2))
    pad = inputs["attention_mask"] == 0
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    for layer, probs in enumerate(out.encoder.attentions):
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
    for probs in explicit.encoder.attentions:
        assert probs.dtype == dtype
        assert bool(torch.isfinite(probs).all())
        assert probs.masked_select(pad[:, None, None, :].expand_as(probs)).abs().max().item() == 0.0
    assert bool(torch.isfinite(fast.mlm.logits).all())
    assert bool(torch.isfinite(explicit.mlm.logits).all())


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
    for i, (a, b) in enumerate(zip(out.encoder.hidden_states, expected.encoder.hidden_states)):
        check(f"{tag} hidden_states[{i}]", a, b, PATHS)
    check(f"{tag} pooled", out.encoder.pooler_output, expected.encoder.pooler_output, PATHS)
    check(f"{tag} MLM logits", out.mlm.logits, expected.mlm.logits, 10 * PATHS)
    if explicit:
        # The reported probabilities are the masked ones, as in the original. The reference
        # sees the same layer inputs, and its probabilities are unmasked.
        for layer, (probs, unmasked) in enumerate(zip(out.encoder.attentions, expected.encoder.attentions)):
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
            assert torch.equal(a.encoder.last_hidden_state, b.encoder.last_hidden_state)


@pytest.mark.parametrize("shape", [(4,), (2,), (1, 3), (8, 3), (7, 3, 1), (21,), ()])
def test_head_mask_wrong_shape(shape):
    config = CONFIGS["odd"]  # 7 layers, 3 heads
    model = ours_with_heads(config, ("mlm",), seed=14)
    inputs = batch(config, seed=14)
    for explicit in (False, True):
        with pytest.raises(ValueError, match="head_mask"):
            model(**inputs, head_mask=torch.ones(shape), output_attentions=explicit)


# ---- initialisation ----------------------------------------------------------------------

def test_init():
    std = 0.05
    config = BertConfig(vocab_size=300, hidden_size=256, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=256, initializer_range=std, pad_token_id=7,
                        id2label={0: "a", 1: "b", 2: "c"})
    torch.manual_seed(19)
    model = BertWithHeads(config, ("mlm", "nsp", "qa", "classifier"))
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


# ---- dropout ----------------------------------------------------------------------------

@pytest.mark.parametrize("explicit", [False, True])
def test_dropout_off_in_eval_on_in_train(explicit):
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                                     classifier_dropout=0.2)
    model = ours_with_heads(config, ("mlm", "nsp", "qa", "classifier"), seed=23)
    inputs = batch(config, seed=23)
    with torch.no_grad():
        a, b = model(**inputs, output_attentions=explicit), model(**inputs, output_attentions=explicit)
        for field in ("encoder.last_hidden_state", "encoder.pooler_output", "mlm.logits", "classifier.logits",
                      "qa.start_logits"):
            assert torch.equal(read(a, field), read(b, field)), field
        model.train()
        c, d = model(**inputs, output_attentions=explicit), model(**inputs, output_attentions=explicit)
    for field in ("encoder.last_hidden_state", "classifier.logits"):
        assert not torch.allclose(read(c, field), read(d, field)), field
        assert not torch.allclose(read(a, field), read(c, field)), field


def read(out, dotted: str) -> torch.Tensor:
    """``read(out, "mlm.logits")`` is ``out.mlm.logits``."""
    for name in dotted.split("."):
        out = getattr(out, name)
    return out


@pytest.mark.parametrize("explicit", [False, True])
def test_attention_dropout_alone_is_applied_in_train(explicit):
    config = CONFIGS["tiny"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.3)
    model = ours_with_heads(config, ("mlm",), seed=24).train()
    inputs = batch(config, seed=24)
    with torch.no_grad():
        a, b = model(**inputs, output_attentions=explicit), model(**inputs, output_attentions=explicit)
    assert not torch.allclose(a.encoder.last_hidden_state, b.encoder.last_hidden_state)


def test_train_mode_without_dropout_equals_eval():
    config = CONFIGS["odd"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = ours_with_heads(config, ("mlm", "nsp"), seed=25)
    inputs = batch(config, seed=25)
    with torch.no_grad():
        for explicit in (False, True):
            model.eval()
            evaluated = model(**inputs, output_attentions=explicit).encoder.last_hidden_state
            model.train()
            trained = model(**inputs, output_attentions=explicit).encoder.last_hidden_state
            check(f"train without dropout explicit={explicit}", trained, evaluated, PATHS)
