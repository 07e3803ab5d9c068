"""The left-to-right LM's targets (BERT's Table 5 / Figure 5 "LTR" baseline): each position predicts the next token.

Nothing is masked in the input: the model sees every token, and the causal attention mask
(``engine.model.encoder.causal_attention_mask``) keeps position i from seeing positions after it. ``labels[i]`` is the
token at ``i + 1``; the last real position has no next token and padding has none (-100), so a row
``[CLS] a b c [SEP]`` is labelled ``a b c [SEP] -100``: [CLS] plays a start-of-text token and [SEP] an end-of-text
token. The head is the masked-LM head (its decoder tied to the input embeddings), reading each position's own
hidden state, as transformers' ``BertLMHeadModel`` (which shifts the labels inside its loss instead).
"""
from __future__ import annotations

import torch

from engine.data.masking import IGNORE_INDEX


def next_token_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, S) the id of the next real token at every real position that has one, -100 elsewhere.

    ``attention_mask`` (B, S) is 1 for real tokens and 0 for padding (right-padded rows).
    """
    if input_ids.dim() != 2 or input_ids.shape != attention_mask.shape:
        raise ValueError(f"input_ids and attention_mask must both be (B, S); got {tuple(input_ids.shape)} "
                         f"and {tuple(attention_mask.shape)}")
    labels = torch.full_like(input_ids, IGNORE_INDEX)                                  # (B, S)
    real = attention_mask.bool()                                                       # (B, S)
    has_next = real[:, :-1] & real[:, 1:]                                             # (B, S-1)
    labels[:, :-1] = torch.where(has_next, input_ids[:, 1:], labels[:, :-1])
    return labels
