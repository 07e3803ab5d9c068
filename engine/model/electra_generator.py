"""ELECTRA's generator (Clark et al., 2020), kept as a head of the discriminator it trains with: ``GENERATOR``.

ELECTRA pretrains a pair. A small masked LM, the generator, reads the masked text and its samples fill the masked
positions; the discriminator (the ELECTRA model that is kept) tells for every token whether it was replaced. The
two share the token embeddings (the word, position and type tables and their LayerNorm: the whole
``bert.embeddings`` module, as the paper's "shared embeddings"); the generator's own parts are

  ``generator.embeddings_project``  E -> H_g, when the embeddings' width E is not the generator's hidden size
  ``generator.encoder.layer.{n}``   the discriminator's number of BERT layers, at the generator's sizes
  ``generator.predictions``         the masked-LM head: dense H_g -> E, GELU, LayerNorm, the decoder tied to the
                                    shared word embeddings (its weight is not saved), a bias per token

The generator's sizes follow ELECTRA's code (``get_generator_config``) from one number, its hidden size as a
fraction of the discriminator's, ``config.family_options["generator_hidden_size"]`` (ELECTRA's own name; written to
``config.json`` and read back by the ELECTRA family): H_g = round(H * fraction), one attention head per 64 of
H_g (at least one, fewer when 64 does not divide it evenly), feed-forward 4 * H_g.

Being a head of the ELECTRA family (``families/electra.py``) is what keeps it with the discriminator: it trains,
is checkpointed and resumes as any head does. Checkpoints keep it under ``generator.``; transformers has no class
for the pair, so ``config.json`` names it ``ElectraGenerator`` beside ``ElectraForPreTraining``, and
``ElectraForPreTraining.from_pretrained`` loads the discriminator and leaves the ``generator.*`` weights unused. A
pass of the discriminator (``BertWithHeads.forward``) does not run it: it reads the masked input, not the
discriminator's states; the replaced-token task calls it (``engine.training.tasks.replaced_tokens``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from engine.model.config import BertConfig
from engine.model.encoder import BertEncoder, additive_attention_mask
from engine.model.head_modules import BertLMPredictionHead
from engine.model.head_specs import HeadInput, HeadSpec

GENERATOR_OPTION = "generator_hidden_size"     # config.json / family_options: H_g as a fraction of H
DEFAULT_GENERATOR_SIZE = 0.25                  # ELECTRA's generator_hidden_size
HEAD_WIDTH = 64                                # ELECTRA's generator: one attention head per 64 hidden units


def generator_size(config: BertConfig) -> float:
    """The generator's hidden size as a fraction of ``config``'s (``family_options``, else ELECTRA's 1/4);
    ``ValueError`` for a value that is not a number in (0, 1]."""
    value = config.family_options.get(GENERATOR_OPTION, DEFAULT_GENERATOR_SIZE)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{GENERATOR_OPTION} must be a fraction in (0, 1] of the discriminator's hidden size, "
                         f"got {value!r}")
    return float(value)


def generator_config(config: BertConfig) -> BertConfig:
    """The generator's sizes for the discriminator ``config`` (see the module): its hidden size, heads and
    feed-forward width; the embeddings' width stays the discriminator's (they are shared)."""
    hidden = max(1, int(round(config.hidden_size * generator_size(config))))
    heads = max(1, hidden // HEAD_WIDTH)
    while hidden % heads:
        heads -= 1
    return config.replace(hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden,
                          embedding_size=config.embedding_width, family_options={})


class ElectraGenerator(nn.Module):
    """The generator's own modules; it reads the shared embeddings' output and predicts tokens at chosen positions."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.config = generator_config(config)
        width, hidden = config.embedding_width, self.config.hidden_size
        self.embeddings_project = nn.Linear(width, hidden) if width != hidden else None
        self.encoder = BertEncoder(self.config)
        self.predictions = BertLMPredictionHead(self.config, word_embeddings)   # decoder tied to the embeddings

    def forward(self, embedded: torch.Tensor, attention_mask: torch.Tensor | None,
                positions: torch.Tensor) -> torch.Tensor:
        """Token logits (N, V) at ``positions`` (B, S) bool (N of them True), from the shared embeddings' output
        ``embedded`` (B, S, E) and the (B, S) padding mask."""
        hidden = self.embeddings_project(embedded) if self.embeddings_project is not None else embedded   # (B, S, Hg)
        mask = additive_attention_mask(attention_mask, hidden.dtype)      # (B, 1, 1, S) or None
        for layer in self.encoder.layers():
            hidden, _ = layer(hidden, mask)
        return self.predictions(hidden[positions])                        # (N, Hg) -> (N, V)

    def own_parameters(self) -> list[nn.Parameter]:
        """Its parameters but the decoder weight, which is the shared word embeddings'."""
        tied = self.predictions.decoder.weight
        return [p for p in self.parameters() if p is not tied]


def _not_in_a_pass(model: Any, x: HeadInput) -> None:
    """A pass of the discriminator leaves the generator out (it reads the masked input): no result."""
    return None


GENERATOR = HeadSpec(
    "generator", "generator", "generator.", "BertGenerator", "ELECTRA generator",
    "ELECTRA's generator (the masked LM that replaces tokens while the discriminator pretrains)",
    build=lambda config, model: ElectraGenerator(config, model.bert.embeddings.word_embeddings),
    run=_not_in_a_pass, trainable=lambda head: head.own_parameters(),
    init=lambda head: head.predictions.reset_bias(), tied=("predictions.decoder.weight",),
    tried_in="the Heads tab's Replaced tokens (with the discriminator it trained)",
    how_to_get="pretrain with --objective rtd (ELECTRA's replaced-token detection)")
"""The generator head (ELECTRA family); class ``BertGenerator`` in the shared names, ``ElectraGenerator`` in the
family's."""
