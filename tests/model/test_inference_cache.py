"""The encoder's inference caches (engine/model/inference_cache.py): the fused and cached parameter
tuples follow optimizer steps, loads and dtype changes, go stale only until ``forget_inference_caches``,
and hold the parameters themselves; checked against transformers on the same weights."""
from __future__ import annotations

import copy

import pytest
import torch

from engine.model.heads import BertWithHeads
from support.reference import CONFIGS, PARITY, batch, check, hf_copy, ours_with_heads

pytestmark = pytest.mark.usefixtures("one_thread")


def _mlm_and_reference(seed: int):
    import transformers

    config = CONFIGS["odd"]
    model = ours_with_heads(config, ("mlm",), seed=seed)
    inputs = batch(config, seed=seed)

    def ours(mode=torch.no_grad) -> torch.Tensor:
        with mode():
            return model(**inputs).mlm.logits

    def theirs() -> torch.Tensor:
        """transformers on a copy of the model's current weights (no cache of ours involved)."""
        with torch.no_grad():
            return hf_copy(model, transformers.BertForMaskedLM)(**inputs).logits

    return model, ours, theirs


def _cached(model: BertWithHeads) -> list[bool]:
    """Whether each inference-cached module of the encoder holds a tuple."""
    from engine.model.inference_cache import InferenceCached

    return [m.inference_cache is not None for m in model.bert.modules() if isinstance(m, InferenceCached)]


def test_inference_follows_optimizer_steps_loads_and_dtype():
    """Inference reads cached tuples (with the fused Q/K/V copy); after an optimizer step (train mode, or
    eval mode with autograd on), load_state_dict (also assign=True) and .double() the outputs still equal
    transformers on the new weights."""
    model, ours, theirs = _mlm_and_reference(seed=31)
    check("inference", ours(torch.inference_mode), theirs(), PARITY)
    assert _cached(model) and all(_cached(model))
    assert all(layer.attention.self.inference_cache.fused_weight is not None for layer in model.bert.encoder.layer)
    check("autograd on (three projections)", ours(torch.enable_grad).detach(), theirs(), PARITY)

    model.train()
    assert not any(_cached(model))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    inputs = batch(model.config, seed=31)
    model(**inputs, labels=inputs["input_ids"]).loss.backward()
    optimizer.step()
    model.eval()
    stepped = ours()
    check("after a train-mode step", stepped, theirs(), PARITY)

    model(**inputs, labels=inputs["input_ids"]).loss.backward()     # eval mode, autograd on, then a step
    optimizer.step()
    assert (ours() - stepped).abs().max() > 1e-3
    check("after an eval-mode step", ours(), theirs(), PARITY)

    for assign in (False, True):                                    # a checkpoint switch while serving
        other = ours_with_heads(model.config, ("mlm",), seed=32 + assign)
        model.load_state_dict(other.state_dict(), assign=assign)
        check(f"after load_state_dict(assign={assign})", ours(), theirs(), PARITY)

    model.double()
    doubled = ours()
    assert doubled.dtype == torch.float64
    check("after .double()", doubled, ours(torch.enable_grad).detach(), 1e-12)


def test_fused_qkv_copy_goes_stale_after_an_in_place_change_until_forget_inference_caches():
    """The documented contract: an in-place change of Q/K/V in eval mode outside autograd is not seen
    until forget_inference_caches(model); then the outputs equal transformers on the new weights."""
    from engine.model.inference_cache import forget_inference_caches

    model, ours, theirs = _mlm_and_reference(seed=33)
    before = ours()
    attention = model.bert.encoder.layer[0].attention.self
    with torch.no_grad():
        for projection in (attention.query, attention.key, attention.value):
            projection.weight.copy_(torch.randn_like(projection.weight) * 0.3)
    assert torch.equal(ours(), before)                              # stale: the fused copy was used
    check("autograd on reads the weights", ours(torch.enable_grad).detach(), theirs(), PARITY)
    forget_inference_caches(model)
    fresh = ours()
    assert (fresh - before).abs().max() > 1e-3
    check("after forget_inference_caches", fresh, theirs(), PARITY)


def test_inference_caches_hold_the_parameters_themselves():
    """Apart from the fused Q/K/V copy the tuples hold the parameters: in-place changes show at once, a deep
    copy (the worker's snapshot) caches its own; a parameter replaced by assignment is seen after
    forget_inference_caches(model), the documented call."""
    from engine.model.inference_cache import forget_inference_caches

    model, ours, theirs = _mlm_and_reference(seed=34)
    before = ours()
    snapshot = copy.deepcopy(model)
    output = model.bert.encoder.layer[-1].output
    with torch.no_grad():
        output.dense.weight.mul_(-1.5)
        output.LayerNorm.bias.add_(0.5)
    changed = ours()
    check("in-place change of cached parameters", changed, theirs(), PARITY)
    with torch.no_grad():
        assert torch.equal(snapshot(**batch(model.config, seed=34)).mlm.logits, before)

    output.dense.weight = torch.nn.Parameter(torch.zeros_like(output.dense.weight))
    assert torch.equal(ours(), changed)                             # the replaced object is not seen ...
    forget_inference_caches(model)
    check("after replacing a parameter", ours(), theirs(), PARITY)  # ... until the caches are dropped
