"""Task heads on top of the encoder, and the model that carries any subset of them.

Heads and their Hugging Face parameter names:
  mlm  cls.predictions.{transform.dense, transform.LayerNorm, bias}; decoder tied to word embeddings
  nsp  cls.seq_relationship
  qa   qa_outputs                 (start/end logits per token)
  cls  classifier                 (sequence classification on the pooled output)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.encoder import BertModel, activation, init_bert_weights
from engine.model.outputs import BertForwardOutput

HEADS = ("mlm", "nsp", "qa", "cls")
IGNORE_INDEX = -100


class BertPredictionHeadTransform(nn.Module):
    """dense -> activation -> LayerNorm, applied before the vocabulary projection."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden)))


class BertLMPredictionHead(nn.Module):
    """Masked-LM head: transform, then a decoder whose weight *is* the word-embedding matrix, plus a bias."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: same Parameter, same storage
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.transform(hidden), self.decoder.weight, self.bias)  # (..., V)


class BertHeadsContainer(nn.Module):
    """HF's ``cls`` module: holds ``predictions`` (MLM) and/or ``seq_relationship`` (NSP)."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding, mlm: bool, nsp: bool) -> None:
        super().__init__()
        if mlm:
            self.predictions = BertLMPredictionHead(config, word_embeddings)
        if nsp:
            self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertWithHeads(nn.Module):
    """A BERT encoder with any of the MLM, NSP, QA and classification heads.

    ``heads`` picks which exist; a model loaded from a checkpoint has exactly the heads
    the checkpoint has. The pooler exists when asked (NSP and classification need it).
    """

    def __init__(self, config: BertConfig, heads: tuple[str, ...] | list[str] = ("mlm", "nsp"),
                 add_pooling_layer: bool | None = None) -> None:
        super().__init__()
        unknown = set(heads) - set(HEADS)
        if unknown:
            raise ValueError(f"unknown heads {sorted(unknown)}; choose from {HEADS}")
        self.config = config
        self.heads = tuple(h for h in HEADS if h in heads)
        if add_pooling_layer is None:
            add_pooling_layer = "nsp" in heads or "cls" in heads or not heads
        if not add_pooling_layer and ("nsp" in heads or "cls" in heads):
            raise ValueError("the NSP and classification heads need the pooler")
        self.bert = BertModel(config, add_pooling_layer=add_pooling_layer)
        if "mlm" in heads or "nsp" in heads:
            self.cls = BertHeadsContainer(config, self.bert.embeddings.word_embeddings, "mlm" in heads, "nsp" in heads)
        if "qa" in heads:
            self.qa_outputs = nn.Linear(config.hidden_size, 2)
        if "cls" in heads:
            dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
            self.dropout = nn.Dropout(dropout)
            self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def init_weights(self) -> None:
        """BERT initialisation of every parameter (MLM bias zero); keeps the decoder tied."""
        init_bert_weights(self, self.config.initializer_range)
        if "mlm" in self.heads:
            with torch.no_grad():
                self.cls.predictions.bias.zero_()

    @property
    def has_pooler(self) -> bool:
        return self.bert.pooler is not None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        output_qk: bool = False,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        class_labels: torch.Tensor | None = None,
        sparse_mlm: bool = False,
        compute: tuple[str, ...] | None = None,
    ) -> BertForwardOutput:
        """Run the encoder and the heads in ``compute`` (default: all the model has).

        ``labels`` (B, S) holds original ids at masked positions and -100 elsewhere. With
        ``sparse_mlm`` the MLM head runs only where labels != -100 (``masked_logits``),
        which gives the same loss as the dense cross-entropy at a fraction of the cost.
        """
        compute = self.heads if compute is None else tuple(h for h in compute if h in self.heads)
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states, output_qk)
        hidden, pooled = out.last_hidden_state, out.pooler_output  # (B, S, H), (B, H)
        losses: list[torch.Tensor] = []
        if "mlm" in compute:
            self._mlm(out, hidden, labels, sparse_mlm)
            if out.mlm_loss is not None:
                losses.append(out.mlm_loss)
        if "nsp" in compute:
            out.seq_relationship_logits = self.cls.seq_relationship(pooled)  # (B, 2)
            if next_sentence_label is not None:
                out.nsp_loss = F.cross_entropy(out.seq_relationship_logits, next_sentence_label.view(-1))
                losses.append(out.nsp_loss)
        if "qa" in compute:
            self._qa(out, hidden, start_positions, end_positions)
            if out.qa_loss is not None:
                losses.append(out.qa_loss)
        if "cls" in compute:
            out.logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
            if class_labels is not None:
                out.classification_loss = self._classification_loss(out.logits, class_labels)
                losses.append(out.classification_loss)
        if losses:
            out.loss = torch.stack(losses).sum()
        return out

    def _mlm(self, out: BertForwardOutput, hidden: torch.Tensor, labels: torch.Tensor | None, sparse: bool) -> None:
        head = self.cls.predictions
        if sparse and labels is not None:
            chosen = labels != IGNORE_INDEX                      # (B, S)
            out.masked_positions = chosen.nonzero()              # (N, 2)
            out.masked_logits = head(hidden[chosen])             # (N, H) -> (N, V)
            targets = labels[chosen]                             # (N,)
            out.mlm_loss = _mean_cross_entropy(out.masked_logits, targets)
            return
        out.prediction_logits = head(hidden)                     # (B, S, V)
        if labels is not None:
            flat = out.prediction_logits.view(-1, out.prediction_logits.size(-1))  # (B*S, V)
            chosen = labels.view(-1) != IGNORE_INDEX
            out.mlm_loss = _mean_cross_entropy(flat[chosen], labels.view(-1)[chosen])

    def _qa(self, out: BertForwardOutput, hidden: torch.Tensor, start: torch.Tensor | None,
            end: torch.Tensor | None) -> None:
        start_end = self.qa_outputs(hidden)                      # (B, S, 2)
        out.start_logits = start_end[..., 0].contiguous()       # (B, S)
        out.end_logits = start_end[..., 1].contiguous()         # (B, S)
        if start is not None and end is not None:
            # As transformers: positions outside the sequence are clamped to S and ignored.
            seq_len = out.start_logits.size(1)
            start = start.view(-1).clamp(0, seq_len)
            end = end.view(-1).clamp(0, seq_len)
            out.qa_loss = (F.cross_entropy(out.start_logits, start, ignore_index=seq_len)
                           + F.cross_entropy(out.end_logits, end, ignore_index=seq_len)) / 2

    def _classification_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.config.num_labels == 1:  # regression, as transformers
            return F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))
        return F.cross_entropy(logits.view(-1, self.config.num_labels), labels.view(-1))


def _mean_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the rows; 0 (still attached to the graph) when there are none."""
    if targets.numel() == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(logits.float(), targets)
