"""Which parameters a run trains: ``freeze_encoder`` (``TrainingConfig.freeze_encoder``: the heads and the pooler
only) and ``freeze_unused`` (heads the task does not run, and an unused pooler, are carried along untrained)."""
from __future__ import annotations

from typing import Sequence

from engine.model.heads import BertWithHeads


def freeze_encoder(model: BertWithHeads) -> int:
    """Stop gradients to the embeddings and the encoder layers (the heads and the pooler still train).

    The MLM decoder weight *is* the word-embedding matrix, so it is frozen with them; the
    MLM transform and decoder bias are not. Returns the number of parameters frozen.
    """
    frozen = 0
    for module in (model.bert.embeddings, model.bert.encoder):
        for param in module.parameters():
            param.requires_grad_(False)
            frozen += param.numel()
    return frozen


def freeze_unused(model: BertWithHeads, heads: Sequence[str], uses_pooler: bool) -> None:
    """Heads the task does not run (and the pooler when it needs none) get no gradient and no
    optimizer slot: they are carried along and saved unchanged. (DistributedDataParallel needs
    this: it expects a gradient for every trainable parameter the forward output reaches.) The
    MLM decoder weight is the word-embedding matrix and belongs to the encoder, not to the head
    (``BertWithHeads.head_parameters``)."""
    unused = [p for head in model.heads if head not in heads for p in model.head_parameters(head)]
    if model.has_pooler and not uses_pooler:
        unused += list(model.bert.pooler.parameters())
    for param in unused:
        param.requires_grad_(False)
