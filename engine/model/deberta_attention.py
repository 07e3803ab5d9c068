"""DeBERTa's disentangled self-attention (He et al., 2021; DeBERTa-v3: He et al., 2023), in our own PyTorch.

Each score adds up to three terms, all divided by sqrt(hd * terms) (``DebertaOptions.scale_terms``):

* content to content, ``q_i · k_j`` (BERT's);
* content to position (``c2p``), ``q_i · Kr[δ(i, j)]``: token i's query against the key of its distance to j;
* position to content (``p2c``), ``k_j · Qr[δ(i, j)]``: token j's key against the query of the same distance,

where ``Kr`` / ``Qr`` are the shared relative embeddings (``rel_embeddings``, 2 x span rows) projected by the
layer's ``pos_key_proj`` / ``pos_query_proj`` (or its own ``key_proj`` / ``query_proj`` with ``share_att_key``),
and ``δ(i, j) = clamp(bucket(i - j) + span, 0, 2 span - 1)``: distances up to ``position_buckets / 2`` kept,
farther ones in log buckets up to ``max_relative_positions`` (:func:`log_buckets`). A padded token neither
attends nor is attended to: its row is uniform over the sequence, as in transformers. Module names equal
transformers' (``query_proj``, ``pos_key_proj``, ...), so a state dict maps one to one.

Two paths, as BERT's: the explicit one returns probabilities, scores, queries and keys; the fast one hands the
position terms to ``scaled_dot_product_attention`` as its additive mask.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.deberta_options import DebertaOptions
from engine.model.encoder import explicit_attention, with_head_mask


def log_buckets(relative: torch.Tensor, buckets: int, max_position: int) -> torch.Tensor:
    """Relative distances (long, any shape) in log buckets: those within ``buckets // 2`` of zero stay as they are,
    farther ones become ``sign * (mid + ceil(log(|d| / mid) / log((max_position - 1) / mid) * (mid - 1)))``
    (``mid = buckets // 2``; computed in float32, as transformers does, so a bucket edge falls where theirs does)."""
    mid = buckets // 2
    distance = relative.abs()
    ratio = torch.log(distance.clamp_min(mid) / mid) / torch.log(
        torch.tensor((max_position - 1) / mid, device=relative.device))             # float32, like its shape
    far = (torch.ceil(ratio * (mid - 1)) + mid) * torch.sign(relative)
    return torch.where(distance > mid, far, relative.to(far.dtype)).long()


def relative_index(seq_len: int, span: int, buckets: int, max_position: int,
                   device: torch.device | str = "cpu") -> torch.Tensor:
    """(S, S) long: ``δ(i, j)``, the row of the relative embeddings token i reads for token j:
    ``clamp(bucket(i - j) + span, 0, 2 span - 1)`` (no buckets when ``buckets`` <= 0)."""
    positions = torch.arange(seq_len, device=device)
    relative = positions[:, None] - positions[None, :]                               # (S, S): i - j
    if buckets > 0:
        relative = log_buckets(relative, buckets, max_position)
    return (relative + span).clamp(0, 2 * span - 1)                                  # (S, S)


class DisentangledSelfAttention(nn.Module):
    """Multi-head attention over content and relative positions (``c2p`` / ``p2c``); Q, K, V with biases."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.num_heads, self.head_size = config.num_attention_heads, config.head_size
        self.query_proj = nn.Linear(hidden, hidden)
        self.key_proj = nn.Linear(hidden, hidden)
        self.value_proj = nn.Linear(hidden, hidden)
        self.terms = options.pos_att_type if options.relative_attention else ()
        self.share_att_key = options.share_att_key
        if self.terms and not self.share_att_key:
            if "c2p" in self.terms:
                self.pos_key_proj = nn.Linear(hidden, hidden)
            if "p2c" in self.terms:
                self.pos_query_proj = nn.Linear(hidden, hidden)
        self.scale = math.sqrt(self.head_size * options.scale_terms)
        self.dropout_prob = config.attention_probs_dropout_prob
        self.pos_dropout = nn.Dropout(config.hidden_dropout_prob)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(..., N, H) -> (..., nh, N, hd)."""
        return x.view(*x.shape[:-1], self.num_heads, self.head_size).transpose(-2, -3)   # (..., nh, N, hd)

    def position_scores(self, q: torch.Tensor, k: torch.Tensor, rel_embeddings: torch.Tensor | None,
                        index: torch.Tensor | None) -> torch.Tensor | None:
        """The ``c2p`` + ``p2c`` terms (B, nh, S, S), already scaled; None without relative attention.
        ``q``, ``k``: (B, nh, S, hd); ``rel_embeddings``: (2 span, H); ``index``: (S, S) ``δ``."""
        if not self.terms or rel_embeddings is None or index is None:
            return None
        rel = self.pos_dropout(rel_embeddings)                                       # (2 span, H)
        batch, heads, seq_len, _ = q.shape
        index = index[None, None].expand(batch, heads, seq_len, seq_len)             # (B, nh, S, S)
        score: torch.Tensor | None = None
        if "c2p" in self.terms:
            pos_key = self._heads((self.key_proj if self.share_att_key else self.pos_key_proj)(rel))  # (nh, 2span, hd)
            c2p = torch.matmul(q, pos_key.transpose(-1, -2))                         # (B, nh, S, 2 span)
            c2p = torch.gather(c2p, -1, index) / self.scale                          # (B, nh, S, S): [i, j]
            score = c2p
        if "p2c" in self.terms:
            pos_query = self._heads((self.query_proj if self.share_att_key else self.pos_query_proj)(rel))
            p2c = torch.matmul(k, pos_query.transpose(-1, -2))                       # (B, nh, S, 2 span): key rows
            p2c = torch.gather(p2c, -1, index.transpose(-1, -2))                     # (B, nh, S, S): [j, i]
            p2c = p2c.transpose(-1, -2) / self.scale                                 # (B, nh, S, S): [i, j]
            score = p2c if score is None else score + p2c
        return score

    def forward(self, hidden: torch.Tensor, keep: torch.Tensor | None, rel_embeddings: torch.Tensor | None,
                index: torch.Tensor | None, head_mask: torch.Tensor | None = None,
                explicit: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Context (B, S, H) of ``hidden`` (B, S, H); ``keep`` (B, 1, S, S) bool (None: nothing padded),
        ``head_mask`` (nh,) multiplies each head's probabilities; with ``explicit`` also probs, scores (the full
        disentangled ones, masked, before softmax), queries and keys (content, (B, nh, S, hd)) for probing."""
        batch, seq_len, hidden_size = hidden.shape
        q, k, v = (self._heads(proj(hidden))                                         # (B, nh, S, hd)
                   for proj in (self.query_proj, self.key_proj, self.value_proj))
        bias = self.position_scores(q, k, rel_embeddings, index)                     # (B, nh, S, S) or None
        dropout = self.dropout_prob if self.training else 0.0
        low = torch.finfo(q.dtype).min
        probes: dict[str, torch.Tensor] = {}
        if explicit:
            scores = torch.matmul(q, k.transpose(-1, -2) / self.scale)               # (B, nh, S, S)
            if bias is not None:
                scores = scores + bias
            if keep is not None:
                scores = scores.masked_fill(~keep, low)
            context, probs = explicit_attention(scores, v, dropout, head_mask)        # (B, nh, S, hd)
            probes = {"probs": probs, "scores": scores, "queries": q, "keys": k}
        else:
            mask = bias
            if keep is not None:
                mask = (bias if bias is not None else q.new_zeros(1, 1, seq_len, seq_len)).masked_fill(~keep, low)
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout,
                                                     scale=1.0 / self.scale)         # (B, nh, S, hd)
            context = with_head_mask(context, head_mask)
        context = context.transpose(1, 2).reshape(batch, seq_len, hidden_size)       # (B, S, H)
        return context, probes
