"""The BERT encoder: embeddings, self-attention, feed-forward layers, pooler.

Post-LayerNorm BERT exactly as Devlin et al. and `transformers.BertModel`. Module
attribute names equal Hugging Face's, so a state dict maps one-to-one onto theirs.
Attention has two paths that agree to 1e-6 in fp32: a fast one
(``scaled_dot_product_attention``) and an explicit one that returns probabilities.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.embeddings import BertEmbeddings
from engine.model.inference_cache import InferenceCached, forget_inference_caches
from engine.model.outputs import EncoderOutput, LayerCollector


def activation(name: str):
    """The feed-forward activation named by a Hugging Face ``hidden_act``."""
    if name == "gelu":
        return F.gelu  # exact (erf) form, as the original BERT
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    return {"relu": F.relu, "silu": F.silu, "swish": F.silu, "tanh": torch.tanh}[name]


def additive_attention_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, S) 1-keep/0-pad -> (B, 1, 1, S) additive mask: 0 to keep, the dtype's minimum to drop.

    A (B, S, S) mask says per query which keys it may attend to (``causal_attention_mask``; transformers'
    BertModel takes the same) -> (B, 1, S, S). ``None`` when nothing is masked, so the fast path can take its
    unmasked kernels.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    if attention_mask.dim() == 3:
        keep = attention_mask[:, None, :, :].to(dtype)  # (B, 1, S, S)
    else:
        keep = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, S)
    return (1.0 - keep) * torch.finfo(dtype).min


def causal_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, S) 1-keep/0-pad -> (B, S, S): position i may attend to the real positions j <= i (a left-to-right
    LM's mask, combined with the padding). With right padding every row keeps position 0: none is all masked."""
    seq_len = attention_mask.shape[-1]
    lower = torch.ones(seq_len, seq_len, dtype=torch.bool, device=attention_mask.device).tril()   # (S, S)
    return (lower[None, :, :] & attention_mask.bool()[:, None, :]).to(attention_mask.dtype)        # (B, S, S)


def explicit_attention(scores: torch.Tensor, v: torch.Tensor, dropout: float, head_mask: torch.Tensor | None,
                       float32_softmax: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """What every family's explicit path does after its scores (B, nh, S, S), masked: softmax (in float32 and back,
    with ``float32_softmax``: ModernBERT's), dropout, a head mask of (nh,) multiplying the probabilities, then the
    values (B, nh, S, hd). Returns (context (B, nh, S, hd), probabilities (B, nh, S, S))."""
    probs = (torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype) if float32_softmax
             else torch.softmax(scores, dim=-1))
    if dropout:
        probs = F.dropout(probs, p=dropout, training=True)
    probs = with_head_mask(probs, head_mask)
    return torch.matmul(probs, v), probs                                       # (B, nh, S, hd), (B, nh, S, S)


def with_head_mask(x: torch.Tensor, head_mask: torch.Tensor | None) -> torch.Tensor:
    """``x`` (B, nh, ...) with each head scaled by ``head_mask`` (nh,); (p * m) @ v == m * (p @ v), so masking a
    head's probabilities or its context is the same."""
    if head_mask is None:
        return x
    return x * head_mask.view(1, -1, *([1] * (x.dim() - 2))).to(x)            # (1, nh, 1, 1)


class AttentionWeights(NamedTuple):
    """What self-attention reads: Q, K, V weights (H, H) and biases (H,); in inference also the fused copy."""

    wq: torch.Tensor
    bq: torch.Tensor
    wk: torch.Tensor
    bk: torch.Tensor
    wv: torch.Tensor
    bv: torch.Tensor
    fused_weight: torch.Tensor | None = None   # [Wq; Wk; Wv] (3H, H), a copy
    fused_bias: torch.Tensor | None = None     # [bq; bk; bv] (3H,), a copy


class BertSelfAttention(InferenceCached):
    """Multi-head scaled dot-product attention over Q, K, V projections (with bias).

    Inference (eval mode, autograd off) projects Q, K and V with one GEMM over a cached copy of
    [Wq; Wk; Wv] (``fuse_qkv``; ``python bench/inference.py --qkv`` times it against three
    GEMMs). Unlike the rest of the cached tuple that copy does not follow in-place changes of
    the weights: see ``engine.model.inference_cache`` for when it is dropped, and call
    ``forget_inference_caches(model)`` after changing Q/K/V in place in eval mode outside autograd.
    """

    fuse_qkv = True     # one GEMM over the cached fused copy in inference; False: three GEMMs

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob

    def read_weights(self) -> AttentionWeights:
        """Query, key and value weight and bias."""
        return AttentionWeights(self.query.weight, self.query.bias, self.key.weight, self.key.bias,
                                self.value.weight, self.value.bias)

    def inference_weights(self) -> AttentionWeights:
        """``read_weights()`` plus, with ``fuse_qkv``, the fused copy."""
        weights = self.read_weights()
        if not self.fuse_qkv:
            return weights
        return weights._replace(fused_weight=torch.cat((weights.wq, weights.wk, weights.wv)),   # (3H, H)
                                fused_bias=torch.cat((weights.bq, weights.bk, weights.bv)))     # (3H,)

    def weights_fit(self, cached: AttentionWeights) -> bool:
        """The fused copy must still have Wq's dtype and device (``.to()`` changes Wq in place, not the copy)."""
        fused = cached.fused_weight
        return fused is None or (fused.dtype == cached.wq.dtype and fused.device == cached.wq.device)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None, head_mask: torch.Tensor | None = None,
                explicit: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Context (B, S, H); with ``explicit`` also probs/scores/queries/keys for probing."""
        batch, seq_len, hidden_size = hidden.shape
        w = self.cached_weights() or self.read_weights()
        if w.fused_weight is not None:
            qkv = F.linear(hidden, w.fused_weight, w.fused_bias)                     # (B, S, 3H)
            qkv = qkv.view(batch, seq_len, 3, self.num_heads, self.head_size)        # (B, S, 3, nh, hd)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)                           # 3 x (B, nh, S, hd)
        else:
            q, k, v = (F.linear(hidden, weight, bias)                                # (B, S, H)
                       .view(batch, seq_len, self.num_heads, self.head_size)         # (B, S, nh, hd)
                       .transpose(1, 2)                                              # (B, nh, S, hd)
                       for weight, bias in ((w.wq, w.bq), (w.wk, w.bk), (w.wv, w.bv)))
        dropout = self.dropout_prob if self.training else 0.0
        probes: dict[str, torch.Tensor] = {}
        if explicit:
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)  # (B, nh, S, S)
            if mask is not None:
                scores = scores + mask
            context, probs = explicit_attention(scores, v, dropout, head_mask)      # (B, nh, S, hd)
            probes = {"probs": probs, "scores": scores, "queries": q, "keys": k}
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)  # (B, nh, S, hd)
            context = with_head_mask(context, head_mask)
        context = context.transpose(1, 2).reshape(batch, seq_len, hidden_size)  # (B, S, H)
        return context, probes


class BertDenseResidualNorm(InferenceCached):
    """LayerNorm(dropout(dense(x)) + residual): the end of both sub-layers.

    HF calls it ``BertSelfOutput`` after attention (H -> H) and ``BertOutput`` after the
    MLP (I -> H); the parameter names (``dense``, ``LayerNorm``) are the same.
    """

    def __init__(self, config: BertConfig, in_features: int) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def read_weights(self) -> tuple:
        """dense weight and bias, then LayerNorm shape, weight, bias and eps."""
        norm = self.LayerNorm
        return self.dense.weight, self.dense.bias, norm.normalized_shape, norm.weight, norm.bias, norm.eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        weight, bias, shape, norm_weight, norm_bias, eps = self.cached_weights() or self.read_weights()
        out = F.linear(x, weight, bias)  # (B, S, H)
        if self.training:
            out = F.dropout(out, p=self.dropout.p, training=True)
        return F.layer_norm(out + residual, shape, norm_weight, norm_bias, eps)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertDenseResidualNorm(config, config.hidden_size)


class BertIntermediate(InferenceCached):
    """The MLP's up projection and activation (H -> I)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def read_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """dense weight and bias."""
        return self.dense.weight, self.dense.bias

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        weight, bias = self.cached_weights() or self.read_weights()
        return self.act(F.linear(hidden, weight, bias))  # (B, S, I)


class BertLayer(InferenceCached):
    """One post-LN transformer block: attention sub-layer, then the GELU MLP sub-layer.

    The sub-layers are applied as functions of their parameters (no nn.Module call per
    Linear/LayerNorm/Dropout): at BERT-mini sizes on a CPU that machinery costs as much
    as a quarter of a forward pass; in inference each reads its parameters from a cached
    tuple (``engine.model.inference_cache``). Hooks on layers and on self-attention still fire.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertDenseResidualNorm(config, config.intermediate_size)

    def read_weights(self) -> tuple[nn.Module, ...]:
        """The sub-modules it calls: self-attention, attention output, intermediate, output."""
        return self.attention.self, self.attention.output, self.intermediate, self.output

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None, head_mask: torch.Tensor | None = None,
                explicit: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        attend, attention_output, intermediate, output = self.cached_weights() or self.read_weights()
        context, probes = attend(hidden, mask, head_mask, explicit)
        attended = attention_output.forward(context, hidden)                         # (B, S, H)
        expanded = intermediate.forward(attended)                                    # (B, S, I)
        return output.forward(expanded, attended), probes


class BertEncoder(nn.Module):
    """The layers' modules: one per layer, or (ALBERT) one per group of layers that share their weights."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        groups = config.num_hidden_groups
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(groups or config.num_hidden_layers))
        per_group = config.num_hidden_layers // groups if groups else 1
        self.order = [index // per_group for index in range(config.num_hidden_layers)]   # layer -> its module

    def layers(self) -> list[BertLayer]:
        """The module each layer runs, in order (a shared one repeats)."""
        return [self.layer[i] for i in self.order]


class BertPooler(nn.Module):
    """tanh(dense(h[:, 0])): the [CLS] summary used by NSP and classification."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))  # (B, H)


def normalise_head_mask(head_mask: torch.Tensor | None, config: BertConfig) -> torch.Tensor | None:
    """Accept (nh,) for every layer or (L, nh); 1 keeps a head, 0 removes it. Returns (L, nh)."""
    if head_mask is None:
        return None
    head_mask = torch.as_tensor(head_mask, dtype=torch.float32)
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    if head_mask.shape == (heads,):
        head_mask = head_mask.expand(layers, heads)  # (L, nh)
    if head_mask.shape != (layers, heads):
        raise ValueError(f"head_mask must have shape ({heads},) or ({layers}, {heads}), got {tuple(head_mask.shape)}")
    return head_mask


class BertModel(nn.Module):
    """Embeddings, L encoder layers and (optionally) the pooler."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        # ALBERT, ELECTRA: embeddings of width E, projected to H before the first layer
        self.embeddings_project = (nn.Linear(config.embedding_size, config.hidden_size)
                                   if config.embedding_size is not None else None)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None

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
        on_layer: Callable[[int, dict[str, torch.Tensor]], None] | None = None,
    ) -> EncoderOutput:
        """Encode a batch. ``attention_mask``: (B, S) 1 for tokens, 0 for padding, or (B, S, S) per query
        (``causal_attention_mask``: left to right). ``output_attentions``/``output_qk`` take the explicit
        attention path. ``on_layer``, when given, is handed each layer's probes (``(index, {"probs": ..., ...})``,
        each (B, nh, S, ...)) as they are made, and they are not collected: the outputs' attentions, queries, keys
        and scores are then empty tuples, and no more than one layer's maps is held at a time."""
        hidden = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, S, E)
        if self.embeddings_project is not None:
            hidden = self.embeddings_project(hidden)                        # (B, S, H)
        mask = additive_attention_mask(attention_mask, hidden.dtype)        # (B, 1, 1|S, S) or None
        head_mask = normalise_head_mask(head_mask, self.config)
        if head_mask is not None:
            head_mask = head_mask.to(hidden.device)
        layers = LayerCollector(hidden, output_attentions, output_qk, output_hidden_states, on_layer)
        for index, layer in enumerate(self.encoder.layers()):
            layer_head_mask = None if head_mask is None else head_mask[index]
            hidden, probes = layer(hidden, mask, layer_head_mask, layers.explicit)
            layers.add(index, hidden, probes)
        return layers.output(hidden, self.pooler(hidden) if self.pooler is not None else None)


@torch.no_grad()
def init_bert_weights(module: nn.Module, initializer_range: float) -> None:
    """BERT initialisation: weights ~ N(0, initializer_range), biases 0, LayerNorm 1/0, pad row 0."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            sub.weight.normal_(0.0, initializer_range)
            if sub.bias is not None:
                sub.bias.zero_()
        elif isinstance(sub, nn.Embedding):
            sub.weight.normal_(0.0, initializer_range)
            if sub.padding_idx is not None:
                sub.weight[sub.padding_idx].zero_()
        elif isinstance(sub, nn.LayerNorm):
            sub.weight.fill_(1.0)
            if sub.bias is not None:                # ModernBERT's norms may have none
                sub.bias.zero_()
    for sub in module.modules():  # last: a tied MLM decoder (a Linear) re-draws the whole embedding matrix
        if isinstance(sub, nn.Embedding) and sub.padding_idx is not None:
            sub.weight[sub.padding_idx].zero_()
    forget_inference_caches(module)
