"""ModernBERT's task heads (``Family.heads``: its variants of the shared ones), each as transformers computes it,
under the module names our heads use, so ``key_mapping`` and export read them as they read BERT's.

Every ModernBERT task head starts with a *prediction head* (``head``: dense H -> H, activation, LayerNorm; the
dense layer's bias only with ``classifier_bias``, the norm's only with ``norm_bias``). Then:
  masked LM                 decoder tied to the token embeddings, bias with ``decoder_bias``  (``cls.predictions``)
  question answering        dropout, ``classifier`` (H -> 2)                                    (``qa_outputs``)
  token classification      dropout, ``classifier`` (H -> labels)                               (``token_classifier``)
  sequence classification   the first token or the mean of the real ones, the prediction head (the base model's
                            ``pooler``), dropout, ``classifier`` (H -> labels)                  (``classifier``)
The dropout (``classifier_dropout``) comes after the prediction head, inside each head's module; the shared
model's dropout before a head is not used (``dropout=False``). Losses are transformers'.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.encoder import activation
from engine.model.family_heads import sequence_loss
from engine.model.head_specs import HEADS, HeadInput
from engine.model.modernbert_options import modernbert_options
from engine.model.outputs import ClassificationOutput, TokenClassificationOutput

IGNORE_INDEX = -100


class ModernBertPredictionHead(nn.Module):
    """LayerNorm(act(dense(h))): what every ModernBERT task head starts with (transformers' ``head``)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        options = modernbert_options(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=options.classifier_bias)
        self.act = activation(options.classifier_activation)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=options.norm_bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(hidden)))                    # (..., H)


class ModernBertPooler(ModernBertPredictionHead):
    """The sequence classifier's input: the first token's vector (``classifier_pooling`` "cls") or the mean over the
    real tokens ("mean"), through the prediction head."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.pooling = modernbert_options(config).classifier_pooling

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, S, H) and the (B, S) mask -> (B, H)."""
        if self.pooling == "cls":
            return super().forward(hidden[:, 0])                          # (B, H)
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], device=hidden.device)
        keep = attention_mask.to(hidden.dtype)[..., None]                 # (B, S, 1)
        return super().forward((hidden * keep).sum(dim=1) / keep.sum(dim=1))   # (B, H)


class ModernBertMaskedLMHead(nn.Module):
    """The masked-LM head: the prediction head (``transform``), then the decoder, whose weight *is* the token
    embeddings', plus a bias when ``decoder_bias``."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = ModernBertPredictionHead(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight                      # tied: same Parameter
        self.bias = nn.Parameter(torch.zeros(config.vocab_size)) if modernbert_options(config).decoder_bias else None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.transform(hidden), self.decoder.weight, self.bias)   # (..., V)

    def own_parameters(self) -> list[nn.Parameter]:
        """The head's own parameters: the prediction head and the bias (the decoder weight is the embeddings')."""
        return [*self.transform.parameters(), *([self.bias] if self.bias is not None else [])]

    def reset_bias(self) -> None:
        """Zero the decoder bias, if there is one."""
        if self.bias is not None:
            with torch.no_grad():
                self.bias.zero_()


class ModernBertTaskHead(nn.Linear):
    """``classifier(dropout(head(h)))`` per token: question answering (2 outputs) and token classification; the
    module is the last linear layer itself (its ``weight`` sized by the labels, as our heads'), the prediction head
    inside it as ``transform``."""

    def __init__(self, config: BertConfig, outputs: int) -> None:
        super().__init__(config.hidden_size, outputs)
        self.transform = ModernBertPredictionHead(config)
        self.drop = nn.Dropout(config.classifier_dropout or 0.0)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return super().forward(self.drop(self.transform(hidden)))        # (B, S, outputs)


class ModernBertClassifier(nn.Linear):
    """``classifier(dropout(pooled))``: the sequence classifier after the pooler (which holds the prediction head)."""

    def __init__(self, config: BertConfig, outputs: int) -> None:
        super().__init__(config.hidden_size, outputs)
        self.drop = nn.Dropout(config.classifier_dropout or 0.0)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return super().forward(self.drop(pooled))                         # (B, outputs)


def _tag_tokens(model: Any, x: HeadInput) -> TokenClassificationOutput:
    """Token classification: logits (B, S, labels); the loss the mean cross-entropy over the labelled tokens."""
    logits = model.head_module("token_classifier")(x.hidden)                     # (B, S, H) -> (B, S, L)
    labels = x.targets.get("token_labels")                                       # (B, S), -100 unlabelled
    if labels is None:
        return TokenClassificationOutput(logits)
    flat = labels.view(-1)                                                       # (B*S,)
    total = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), flat,      # (B*S, L)
                            ignore_index=IGNORE_INDEX, reduction="sum")
    return TokenClassificationOutput(logits, total / (flat != IGNORE_INDEX).sum().clamp_min(1))


def _classify(model: Any, x: HeadInput) -> ClassificationOutput:
    """Sequence classification from the pooler's output (B, H): logits (B, labels)."""
    logits = model.head_module("classifier")(x.pooled)                           # (B, H) -> (B, L)
    return ClassificationOutput(logits, sequence_loss(logits, x.targets.get("class_labels"), model.config.num_labels))


MODERNBERT_HEADS = (
    replace(HEADS["mlm"], build=lambda config, model: ModernBertMaskedLMHead(
        config, model.bert.embeddings.word_embeddings)),
    replace(HEADS["qa"], build=lambda config, model: ModernBertTaskHead(config, 2)),
    replace(HEADS["classifier"], build=lambda config, model: ModernBertClassifier(config, config.num_labels),
            run=_classify, dropout=False),
    replace(HEADS["token_classifier"], build=lambda config, model: ModernBertTaskHead(config, config.num_labels),
            run=_tag_tokens, dropout=False),
)
"""ModernBERT's variants of the masked-LM, QA, sequence- and token-classification heads (``Family.heads``)."""
