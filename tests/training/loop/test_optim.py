"""Optimizer parameter groups and learning-rate schedules (engine.training.loop.optim)."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import transformers

from engine.model.heads import BertWithHeads
from engine.training.loop.optim import build_optimizer, build_scheduler, decay_parameter_names, lr_factor, parameter_groups


@pytest.mark.parametrize("warmup,total", [(10, 100), (0, 50), (1, 7), (30, 30)])
def test_linear_schedule_matches_transformers(warmup, total):
    reference = transformers.get_linear_schedule_with_warmup(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), warmup, total).lr_lambdas[0]
    for step in range(total + 20):
        assert lr_factor(step, "linear", warmup, total) == pytest.approx(reference(step), abs=1e-12)


@pytest.mark.parametrize("warmup", [0, 10, 100])
def test_inverse_sqrt_schedule_matches_transformers(warmup):
    reference = transformers.get_inverse_sqrt_schedule(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), warmup).lr_lambdas[0]
    for step in list(range(300)) + [10_000, 123_456]:
        assert lr_factor(step, "inverse_sqrt", warmup, 1000) == pytest.approx(reference(step), rel=1e-12)


def test_schedule_shapes_by_hand():
    linear = [lr_factor(s, "linear", 10, 110) for s in range(120)]
    assert linear[0] == 0.0 and linear[5] == 0.5 and linear[10] == 1.0
    assert all(a < b for a, b in zip(linear[:10], linear[1:11]))             # warmup: linear up
    assert linear[60] == pytest.approx(0.5) and linear[110] == 0.0 and linear[119] == 0.0
    assert all(a > b for a, b in zip(linear[10:110], linear[11:111]))        # then linear down to 0
    assert lr_factor(40, "inverse_sqrt", 10, 100) == pytest.approx(math.sqrt(10 / 40))
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_factor(3, "cosine", 1, 10)


def test_scheduler_drives_the_optimizer_lr(make_config):
    model = BertWithHeads(make_config())
    optimizer = build_optimizer(model, 5e-4)
    scheduler = build_scheduler(optimizer, "linear", 4, 20)
    seen = []
    for _ in range(22):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([5e-4 * lr_factor(s, "linear", 4, 20) for s in range(22)], abs=1e-15)
    assert all(g["lr"] == seen[-1] or g["lr"] == 0.0 for g in optimizer.param_groups)


def test_no_decay_on_biases_and_layernorm_and_tied_weight_once(make_config):
    model = BertWithHeads(make_config(), heads=("mlm", "nsp"))
    decay, no_decay = decay_parameter_names(model)
    assert set(decay).isdisjoint(no_decay)
    assert all(n.endswith("bias") or "LayerNorm" in n for n in no_decay)
    assert not any(n.endswith("bias") or "LayerNorm" in n for n in decay)
    assert "cls.predictions.bias" in no_decay and "bert.embeddings.LayerNorm.weight" in no_decay
    assert "cls.predictions.transform.LayerNorm.weight" in no_decay
    assert "bert.embeddings.word_embeddings.weight" in decay
    assert "cls.predictions.decoder.weight" not in decay + no_decay           # tied: listed once, as the embedding
    groups = parameter_groups(model, 0.01)
    params = [p for g in groups for p in g["params"]]
    assert len({id(p) for p in params}) == len(params)                          # no parameter twice
    unique = {id(p): p for p in model.parameters()}
    assert {id(p) for p in params} == set(unique)                               # and none left out
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0]
    optimizer = build_optimizer(model, 1e-3, weight_decay=0.1, betas=(0.8, 0.99), eps=1e-7)
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]
    assert optimizer.param_groups[0]["betas"] == (0.8, 0.99) and optimizer.param_groups[0]["eps"] == 1e-7


def test_weight_decay_skips_biases(make_config):
    """With zero gradients only decoupled weight decay moves parameters: weights shrink, biases stay."""
    model = BertWithHeads(make_config())
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1.0)
    optimizer = build_optimizer(model, 0.1, weight_decay=0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    assert torch.allclose(model.bert.encoder.layer[0].attention.self.query.weight, torch.tensor(0.95))
    assert torch.equal(model.bert.encoder.layer[0].attention.self.query.bias, torch.ones(32))
    assert torch.equal(model.bert.embeddings.LayerNorm.weight, torch.ones(32))


def test_fused_adamw_gives_the_same_update_as_the_default_kernel():
    """The trainer uses the fused AdamW kernel (much faster on CPU); it must not change the maths."""
    from engine import BertWithHeads, preset
    from engine.training.loop.optim import build_optimizer, parameter_groups

    torch.manual_seed(0)
    model = BertWithHeads(preset("tiny", vocab_size=90, hidden_size=32, num_attention_heads=4,
                                 intermediate_size=40, num_hidden_layers=2, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0), heads=("mlm", "nsp"))
    reference = copy.deepcopy(model)
    fused = build_optimizer(model, 1e-3, device=torch.device("cpu"))
    assert fused.defaults["fused"] is True
    default = torch.optim.AdamW(parameter_groups(reference, 0.01), lr=1e-3, eps=1e-6)
    ids = torch.randint(5, 90, (4, 12))
    for _ in range(5):
        for net, optimizer in ((model, fused), (reference, default)):
            net(ids, labels=ids, next_sentence_label=torch.zeros(4, dtype=torch.long)).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        assert (a - b).abs().max() <= 1e-6, name


def test_warm_up_pays_the_first_optimizer_cost_in_advance():
    """After warm_up the expensive one-off import has happened, so the next AdamW is quick to build."""
    import sys

    from engine.training.loop.optim import warm_up

    warm_up()
    assert "torch._dynamo" in sys.modules
    model = torch.nn.Linear(3, 2)
    optimizer = build_optimizer(model, 1e-3, device=torch.device("cpu"))
    before = model.weight.detach().clone()
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.weight.detach())
