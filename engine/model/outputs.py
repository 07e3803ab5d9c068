"""What a forward pass returns: one dataclass, attribute names as in `transformers`."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class BertForwardOutput:
    """Outputs of :class:`engine.model.encoder.BertModel` / :class:`engine.model.heads.BertWithHeads`.

    Shapes: B batch, S sequence, H hidden, nh heads, hd head size, V vocabulary, L layers.
    Fields a call did not ask for (or a head the model lacks) are ``None``.
    """

    last_hidden_state: torch.Tensor                      # (B, S, H)
    pooler_output: torch.Tensor | None = None            # (B, H)
    hidden_states: tuple[torch.Tensor, ...] | None = None  # L + 1 of (B, S, H); [0] = embeddings
    attentions: tuple[torch.Tensor, ...] | None = None   # L of (B, nh, S, S), softmax probabilities
    queries: tuple[torch.Tensor, ...] | None = None      # L of (B, nh, S, hd)
    keys: tuple[torch.Tensor, ...] | None = None         # L of (B, nh, S, hd)
    attention_scores: tuple[torch.Tensor, ...] | None = None  # L of (B, nh, S, S), pre-softmax, masked
    prediction_logits: torch.Tensor | None = None        # (B, S, V) dense MLM logits
    masked_positions: torch.Tensor | None = None         # (N, 2) [batch, position] rows (sparse MLM)
    masked_logits: torch.Tensor | None = None            # (N, V) MLM logits at masked positions only
    seq_relationship_logits: torch.Tensor | None = None  # (B, 2); index 0 = IsNext
    start_logits: torch.Tensor | None = None             # (B, S)
    end_logits: torch.Tensor | None = None               # (B, S)
    logits: torch.Tensor | None = None                   # (B, num_labels)
    loss: torch.Tensor | None = None                     # sum of the losses asked for (as transformers)
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    qa_loss: torch.Tensor | None = None
    classification_loss: torch.Tensor | None = None
