"""The equal-compute estimate (``engine.experiments.compute``) that gives ELECTRA's arm its steps: the formula reads
the very shapes of the models the runs build (its dense term is twice their weights), the generator costs extra,
and the two arms' totals agree within one step at every scale."""
from __future__ import annotations

import pytest
import torch

from engine.experiments.compute import (
    arm_config, encoder_flops, equal_compute_steps, mlm_head_flops, rtd_head_flops, train_flops_per_step,
)
from engine.model.electra_generator import GENERATOR_OPTION, generator_config
from engine.model.heads import BertWithHeads


def linear_weights(module: torch.nn.Module, prefix: str) -> int:
    """Weights of the dense (2-D) matrices under ``prefix``."""
    return sum(p.numel() for name, p in module.named_parameters() if name.startswith(prefix) and p.dim() == 2)


def test_the_formula_counts_the_weights_of_the_models_the_runs_build():
    config = arm_config("tiny", 500).replace(model_type="electra", family_options={GENERATOR_OPTION: 0.25})
    model = BertWithHeads(config, heads=("replaced_tokens", "generator"))
    seq = 64
    attention = lambda c: c.num_hidden_layers * 4 * seq * c.hidden_size           # noqa: E731 (not weights)
    discriminator = encoder_flops(config, seq) - attention(config)
    assert discriminator == 2 * linear_weights(model, "bert.encoder.")
    gen_weights = linear_weights(model, "generator.encoder.") + linear_weights(model, "generator.embeddings_project")
    small = generator_config(config)
    assert encoder_flops(small, seq) - attention(small) == 2 * gen_weights
    head = linear_weights(model, "generator.predictions.") + model.bert.embeddings.word_embeddings.weight.numel()
    assert mlm_head_flops(small) == 2 * head                                     # transform + tied decoder
    assert rtd_head_flops(config) == 2 * linear_weights(model, "discriminator_predictions.")   # H -> H, H -> 1


@pytest.mark.parametrize("preset_name, vocab, batch, seq", [("tiny", 4000, 16, 64), ("mini", 8000, 32, 128),
                                                            ("small", 30522, 128, 128)])
@pytest.mark.parametrize("steps", [1, 100, 600, 3000])
def test_both_arms_spend_the_same_training_flops_within_one_step(preset_name, vocab, batch, seq, steps):
    config = arm_config(preset_name, vocab)
    mlm = train_flops_per_step(config, "mlm", batch, seq)
    rtd = train_flops_per_step(config, "rtd", batch, seq)
    assert rtd > mlm                                                             # the generator costs extra
    cut = equal_compute_steps(steps, config, batch, seq)
    assert cut <= steps and abs(cut * rtd - steps * mlm) <= rtd


def test_a_bigger_generator_leaves_fewer_steps_and_other_objectives_are_refused():
    config = arm_config("tiny", 4000)
    assert equal_compute_steps(600, config, 16, 64, generator_size=1.0) < equal_compute_steps(600, config, 16, 64)
    with pytest.raises(ValueError, match="objective mlm or rtd"):
        train_flops_per_step(config, "clm", 16, 64)
