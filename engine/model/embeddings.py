"""The input embeddings every family builds on: LayerNorm(word + position [+ token type]), then dropout.

BERT adds three learned tables (``transformers.BertEmbeddings``). What a family changes is a field of its config
(``engine/model/families``): no token-type table (``type_vocab_size`` 0: DistilBERT), positions that count from
``pad_token_id + 1`` and skip padding (``position_offset``: RoBERTa, XLM-R), and tables of width
``embedding_size`` (E) that the encoder projects to the hidden width (ALBERT, ELECTRA: ``BertModel.
embeddings_project``). Attribute names equal Hugging Face's, so a state dict maps one to one.
"""
from __future__ import annotations

import torch
from torch import nn

from engine.model.config import BertConfig


def position_ids_for(input_ids: torch.Tensor, offset: int, pad_token_id: int) -> torch.Tensor:
    """(B, S) position ids: ``0..S-1`` (offset 0); else RoBERTa's rule, ``pad_token_id`` on padding and
    ``pad_token_id`` + 1, + 2, ... on the other tokens, counted over the non-padding tokens only."""
    batch, seq_len = input_ids.shape
    if not offset:
        return torch.arange(seq_len, device=input_ids.device)[None, :].expand(batch, seq_len)   # (B, S)
    keep = input_ids.ne(pad_token_id).int()                                                   # (B, S)
    return (torch.cumsum(keep, dim=1) * keep + pad_token_id).long()                          # (B, S)


class BertEmbeddings(nn.Module):
    """LayerNorm(word + position [+ token type]) followed by dropout, each table ``config.embedding_width`` wide."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        width = config.embedding_width
        self.offset, self.pad_token_id = config.position_offset, config.pad_token_id
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, width,
                                                padding_idx=config.pad_token_id if self.offset else None)
        self.token_type_embeddings = (nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size
                                      else None)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def parts(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
              position_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The three summands (word, position, token type), each (B, S, E), before LayerNorm; the token-type
        one is zeros for a family without segments."""
        _, seq_len = input_ids.shape
        if seq_len + self.offset > self.position_embeddings.num_embeddings:
            raise ValueError(f"sequence of {seq_len} tokens is longer than the "
                             f"{self.position_embeddings.num_embeddings - self.offset} positions the model has "
                             f"(max_position_embeddings {self.position_embeddings.num_embeddings})")
        if position_ids is None:
            position_ids = position_ids_for(input_ids, self.offset, self.pad_token_id)          # (B, S)
        word = self.word_embeddings(input_ids)                                                   # (B, S, E)
        if self.token_type_embeddings is None:
            token_type = torch.zeros_like(word)
        else:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            token_type = self.token_type_embeddings(token_type_ids)
        return word, self.position_embeddings(position_ids), token_type

    def finish(self, summed: torch.Tensor) -> torch.Tensor:
        """The embedding output of the summands' sum (B, S, E), dropout aside: its LayerNorm."""
        return self.LayerNorm(summed)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        word, position, token_type = self.parts(input_ids, token_type_ids, position_ids)
        return self.dropout(self.finish(word + token_type + position))  # (B, S, E)
