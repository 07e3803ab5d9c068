"""The modules of the heads that are more than one ``nn.Linear``: the masked-LM head (a transform, then a
decoder tied to the word embeddings). ``engine.model.head_specs`` builds every head's module."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.encoder import activation


class BertPredictionHeadTransform(nn.Module):
    """dense -> activation -> LayerNorm, applied before the vocabulary projection (H -> E: the embeddings' width)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        width = config.embedding_width                 # H; E where the family factorises its embeddings
        self.dense = nn.Linear(config.hidden_size, width)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden)))


class BertLMPredictionHead(nn.Module):
    """Masked-LM head: transform, then a decoder whose weight *is* the word-embedding matrix, plus a bias."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.embedding_width, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: same Parameter, same storage
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.transform(hidden), self.decoder.weight, self.bias)  # (..., V)

    def own_parameters(self) -> list[nn.Parameter]:
        """The parameters of the head itself: the transform and the bias (the decoder weight is the embeddings')."""
        return [*self.transform.parameters(), self.bias]

    def reset_bias(self) -> None:
        """Zero the decoder bias (BERT's initialisation)."""
        with torch.no_grad():
            self.bias.zero_()
