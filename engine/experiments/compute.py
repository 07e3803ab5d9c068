"""Training compute, estimated from a model's shapes: how ELECTRA's replaced-token detection and BERT's masked LM
are given the same training FLOPs (Clark et al. 2020 compare them at equal compute).

The estimate (``train_flops_per_step``) counts the multiply-adds of the dense layers and of attention, 2 FLOPs
each, forward, and a backward pass of twice that (training = 3 × forward), for one batch of ``B × S`` positions
(padding included, as the model computes it):

    encoder, per position and layer:   2·(4·H² + 2·H·I) + 4·S·H
        (the query, key, value and output projections, the two feed-forward layers; the attention scores
        Q·Kᵀ and their weighted sum of V, S·H multiply-adds each)
    embedding projection E -> H (when the embeddings are narrower than the encoder), per position: 2·E·H
    masked-LM head, per masked position (the pretraining task runs it there only): 2·(H·E + E·V)
        (its dense transform H -> E, then the decoder E -> V, tied to the word embeddings)
    replaced-token head, per position: 2·(H² + H)   (ELECTRA's discriminator head: dense H -> H, then H -> 1)

with H the hidden size, I the feed-forward width, E the embedding width, V the vocabulary and a masked share of
``mlm_probability`` of the positions. Embedding look-ups, layer norms, softmaxes and the generator's sampling are
left out (a few percent at these sizes, alike for both arms). The masked-LM arm is one encoder and its MLM head;
the replaced-token arm is the generator (``engine.model.electra_generator.generator_config``: the same layers at
a fraction of the width, with its own MLM head) plus the discriminator (the same size as the masked-LM arm's model)
and its replaced-token head. ``equal_compute_steps`` cuts the second arm's steps so both spend the same total:
``round(steps × F_mlm / F_rtd)``, which differs from the first arm's total by at most half of one of its steps.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.model.config import BertConfig, preset
from engine.model.electra_generator import GENERATOR_OPTION, generator_config


def encoder_flops(config: BertConfig, seq_length: int) -> float:
    """Forward FLOPs of the encoder (and its embedding projection) per position."""
    h, i = config.hidden_size, config.intermediate_size
    per_layer = 2 * (4 * h * h + 2 * h * i) + 4 * seq_length * h
    projection = 2 * config.embedding_width * h if config.embedding_width != h else 0
    return config.num_hidden_layers * per_layer + projection


def mlm_head_flops(config: BertConfig) -> float:
    """Forward FLOPs of the masked-LM head per predicted position."""
    return 2 * (config.hidden_size * config.embedding_width + config.embedding_width * config.vocab_size)


def rtd_head_flops(config: BertConfig) -> float:
    """Forward FLOPs of ELECTRA's replaced-token head per position."""
    return 2 * (config.hidden_size ** 2 + config.hidden_size)


def train_flops_per_step(config: BertConfig, objective: str, batch_size: int, seq_length: int,
                         mlm_probability: float = 0.15, generator_size: float = 0.25) -> float:
    """Training FLOPs of one step (forward and backward) of a ``mlm`` or ``rtd`` pretraining run (see the
    module), ``config`` being the masked-LM model or the discriminator."""
    positions = batch_size * seq_length
    masked = mlm_probability * positions
    if objective == "mlm":
        forward = positions * encoder_flops(config, seq_length) + masked * mlm_head_flops(config)
    elif objective == "rtd":
        generator = generator_config(config.replace(family_options={GENERATOR_OPTION: generator_size}))
        forward = (positions * encoder_flops(generator, seq_length) + masked * mlm_head_flops(generator)
                   + positions * (encoder_flops(config, seq_length) + rtd_head_flops(config)))
    else:
        raise ValueError(f"the compute estimate is for objective mlm or rtd, not {objective!r}")
    return 3.0 * forward


def arm_config(preset_name: str, vocab_size: int, overrides: Mapping[str, Any] | None = None) -> BertConfig:
    """The model shapes of an experiment arm: the preset, the vocabulary, the arm's ``model_overrides``."""
    return preset(preset_name, vocab_size=vocab_size, **dict(overrides or {}))


def equal_compute_steps(steps: int, config: BertConfig, batch_size: int, seq_length: int,
                        mlm_probability: float = 0.15, generator_size: float = 0.25) -> int:
    """The replaced-token arm's steps that spend what ``steps`` masked-LM steps spend (at least 1)."""
    mlm = train_flops_per_step(config, "mlm", batch_size, seq_length, mlm_probability)
    rtd = train_flops_per_step(config, "rtd", batch_size, seq_length, mlm_probability, generator_size)
    return max(1, round(steps * mlm / rtd))
