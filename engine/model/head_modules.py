"""The modules of the heads that are more than one ``nn.Linear``: the masked-LM head (a transform, then a
decoder tied to the word embeddings), and the families' own (``engine.model.family_heads``): the first-token
classifiers of RoBERTa, ELECTRA and DistilBERT, ALBERT's sentence-order classifier, ELECTRA's replaced-token head.
``engine.model.head_specs`` and ``family_heads`` build every head's module."""
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


def classifier_dropout(config: BertConfig) -> float:
    """The dropout a classifier head uses, as transformers: ``classifier_dropout``, else ``hidden_dropout_prob``."""
    return config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob


class FirstTokenClassifier(nn.Module):
    """RoBERTa's and ELECTRA's sequence classifier: no pooler; the first token's vector, dropout, ``dense`` (H -> H),
    an activation (RoBERTa tanh, ELECTRA GELU), dropout, then ``out_proj`` (H -> num_labels)."""

    def __init__(self, config: BertConfig, act: str) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(act)
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        first = self.dropout(hidden[:, 0])                                # (B, S, H) -> (B, H)
        return self.out_proj(self.dropout(self.act(self.dense(first))))  # (B, num_labels)


class ProjectedScorer(nn.Linear):
    """A linear scorer of the first token behind a projection of its own: DistilBERT's ``pre_classifier`` (H -> H,
    ReLU, dropout) and ELECTRA's sequence summary (``summary``: H -> H, GELU, dropout). Its own weight and bias are
    transformers' ``classifier``; the projection is its child under the family's name (``projection``)."""

    def __init__(self, config: BertConfig, outputs: int, projection: str, act: str, dropout: float) -> None:
        super().__init__(config.hidden_size, outputs)
        self.projection = projection
        self.add_module(projection, nn.Linear(config.hidden_size, config.hidden_size))
        self.act = activation(act)
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        projected = self.get_submodule(self.projection)(hidden[:, 0])   # (B, S, H) -> (B, H)
        return super().forward(self.dropout(self.act(projected)))         # (B, outputs)


class DroppedLinear(nn.Linear):
    """``nn.Linear`` with dropout on its input (ALBERT's sentence-order classifier on the pooled vector)."""

    def __init__(self, in_features: int, out_features: int, dropout: float) -> None:
        super().__init__(in_features, out_features)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.dropout(x))


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator head: ``dense`` (H -> H), the model's activation, ``dense_prediction`` (H -> 1):
    one logit per token, above 0 where the discriminator calls the token replaced."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)   # (B, S, H) -> (B, S, 1) -> (B, S)
