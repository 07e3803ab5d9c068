"""ModernBERT (Warner et al., 2024) in our own PyTorch, as ``transformers.ModernBertModel`` computes it.

What differs from BERT: token embeddings only (no positions, no segments), then LayerNorm; pre-LN layers (the
first layer's attention norm is the identity); one fused ``Wqkv`` projection; rotary positions on queries and keys
(``engine/model/rotary.py``), with one base for the global layers and another for the local ones; local layers
attend only within ``local_attention // 2`` positions either side, and every ``global_attn_every_n_layers``-th
layer (``layer_types``) to all; a GeGLU feed-forward (``Wi`` to 2I, split into input and gate, ``act(input) *
gate``, ``Wo``); a final LayerNorm. Linear and norm layers carry biases only as ``family_options`` say
(``engine/model/modernbert_options.py``). Module names equal transformers', so weights map one to one under
``bert.`` (transformers' ``model.``).

Attention has two paths that agree to 1e-6 in fp32: ``scaled_dot_product_attention``, and an explicit one that
returns probabilities, pre-softmax scores and the rotated queries and keys. Padding is masked with the dtype's
minimum (transformers' eager path), so every real position's numbers equal transformers'. ``hidden_states`` are
transformers' too: the embeddings, each layer's output, and the last one after the final norm.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.encoder import activation, explicit_attention, normalise_head_mask, with_head_mask
from engine.model.modernbert_heads import ModernBertPooler
from engine.model.modernbert_options import ModernBertOptions, modernbert_options
from engine.model.outputs import EncoderOutput, LayerCollector
from engine.model.rotary import rotary_angles, rotate


def _norm(config: BertConfig, options: ModernBertOptions) -> nn.LayerNorm:
    return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=options.norm_bias)


class ModernBertEmbeddings(nn.Module):
    """dropout(LayerNorm(token embedding)): no position or segment tables."""

    def __init__(self, config: BertConfig, options: ModernBertOptions) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = _norm(config, options)
        self.drop = nn.Dropout(options.embedding_dropout)

    @property
    def word_embeddings(self) -> nn.Embedding:
        """The token embeddings under BERT's name (what the masked-LM decoder is tied to)."""
        return self.tok_embeddings

    position_embeddings = None          # positions enter inside attention (rotary angles on Q and K)
    token_type_embeddings = None        # no segments

    def parts(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
              position_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The summands as BERT's embeddings name them (word, position, token type), each (B, S, H): the token
        embeddings alone, zeros for the tables this family does not have (the Embeddings view's breakdown)."""
        word = self.tok_embeddings(input_ids)                                  # (B, S, H)
        return word, torch.zeros_like(word), torch.zeros_like(word)

    def finish(self, summed: torch.Tensor) -> torch.Tensor:
        """The embedding output of the summands' sum, dropout aside: its norm."""
        return self.norm(summed)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.norm(self.tok_embeddings(input_ids)))         # (B, S, H)


class ModernBertAttention(nn.Module):
    """Multi-head attention over a fused Q, K, V projection, rotary positions on Q and K, then ``Wo``."""

    def __init__(self, config: BertConfig, options: ModernBertOptions) -> None:
        super().__init__()
        self.num_heads, self.head_size = config.num_attention_heads, config.head_size
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=options.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=options.attention_bias)
        self.dropout_prob = config.attention_probs_dropout_prob          # on the probabilities and after Wo

    def forward(self, hidden: torch.Tensor, angles: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None,
                head_mask: torch.Tensor | None = None, explicit: bool = False
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(B, S, H) -> (B, S, H); with ``explicit`` also probs/scores/queries/keys (the queries and keys rotated)."""
        batch, seq_len, hidden_size = hidden.shape
        qkv = self.Wqkv(hidden).view(batch, seq_len, 3, self.num_heads, self.head_size)   # (B, S, 3, nh, hd)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)                                    # 3 x (B, nh, S, hd)
        q, k = rotate(q, *angles), rotate(k, *angles)                                      # (B, nh, S, hd)
        dropout = self.dropout_prob if self.training else 0.0
        scale = self.head_size ** -0.5
        probes: dict[str, torch.Tensor] = {}
        if explicit:
            scores = torch.matmul(q, k.transpose(-1, -2)) * scale                          # (B, nh, S, S)
            if mask is not None:
                scores = scores + mask
            context, probs = explicit_attention(scores, v, dropout, head_mask, float32_softmax=True)  # (B, nh, S, hd)
            probes = {"probs": probs, "scores": scores, "queries": q, "keys": k}
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout,
                                                     scale=scale)                          # (B, nh, S, hd)
            context = with_head_mask(context, head_mask)
        context = context.transpose(1, 2).reshape(batch, seq_len, hidden_size)            # (B, S, H)
        out = self.Wo(context)
        return (F.dropout(out, p=dropout, training=True) if dropout else out), probes


class ModernBertMLP(nn.Module):
    """GeGLU: ``Wo(dropout(act(input) * gate))`` where ``Wi`` gives input and gate (H -> 2I)."""

    def __init__(self, config: BertConfig, options: ModernBertOptions) -> None:
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=options.mlp_bias)
        self.act = activation(config.hidden_act)
        self.drop = nn.Dropout(config.hidden_dropout_prob)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=options.mlp_bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        given, gate = self.Wi(hidden).chunk(2, dim=-1)                                     # 2 x (B, S, I)
        return self.Wo(self.drop(self.act(given) * gate))                                  # (B, S, H)


class ModernBertEncoderLayer(nn.Module):
    """Pre-LN: ``h + attn(attn_norm(h))``, then ``+ mlp(mlp_norm(.))``; layer 0's ``attn_norm`` is the identity
    (the embeddings end with a norm)."""

    def __init__(self, config: BertConfig, options: ModernBertOptions, index: int) -> None:
        super().__init__()
        self.is_global = options.is_global(index)
        self.attn_norm = nn.Identity() if index == 0 else _norm(config, options)
        self.attn = ModernBertAttention(config, options)
        self.mlp_norm = _norm(config, options)
        self.mlp = ModernBertMLP(config, options)

    def forward(self, hidden: torch.Tensor, angles: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None,
                head_mask: torch.Tensor | None = None, explicit: bool = False
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        attended, probes = self.attn(self.attn_norm(hidden), angles, mask, head_mask, explicit)
        hidden = hidden + attended                                                          # (B, S, H)
        return hidden + self.mlp(self.mlp_norm(hidden)), probes


def attention_masks(attention_mask: torch.Tensor | None, seq_len: int, window: int, dtype: torch.dtype,
                    device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Additive masks (0 keeps, the dtype's minimum drops) for the global layers, (B, 1, 1, S) or None when nothing
    is padded, and for the local ones, (B or 1, 1, S, S): a key further than ``window`` positions away, or padding,
    is dropped (None when the window covers every pair and nothing is padded)."""
    padded = attention_mask is not None and not bool(attention_mask.all())
    keys = attention_mask.bool()[:, None, None, :] if padded else None                     # (B, 1, 1, S)
    positions = torch.arange(seq_len, device=device)
    near = ((positions[:, None] - positions[None, :]).abs() <= window)[None, None]         # (1, 1, S, S)
    local = near & keys if keys is not None else (near if window < seq_len - 1 else None)
    minimum = torch.finfo(dtype).min

    def additive(allowed: torch.Tensor | None) -> torch.Tensor | None:
        if allowed is None:
            return None
        return torch.full(allowed.shape, minimum, dtype=dtype, device=device).masked_fill(allowed, 0.0)

    return additive(keys), additive(local)


class ModernBertModel(nn.Module):
    """Embeddings, L ModernBERT layers, the final norm and (optionally) the sequence classifier's pooler; takes
    ``BertModel.forward``'s arguments (``token_type_ids`` are ignored: ModernBERT has no segments)."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.options = modernbert_options(config)
        self.embeddings = ModernBertEmbeddings(config, self.options)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, self.options, i)
                                    for i in range(config.num_hidden_layers))
        self.final_norm = _norm(config, self.options)
        self.pooler = ModernBertPooler(config) if add_pooling_layer else None

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
        """Encode a batch, as ``BertModel.forward``: ``output_attentions`` / ``output_qk`` take the explicit path;
        ``on_layer`` is handed each layer's probes instead of collecting them."""
        hidden = self.embeddings(input_ids)                                                # (B, S, H)
        seq_len = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=input_ids.device)[None, :]         # (1, S)
        global_mask, local_mask = attention_masks(attention_mask, seq_len, self.options.window, hidden.dtype,
                                                  hidden.device)
        size = self.config.head_size
        angles = {True: rotary_angles(position_ids, size, self.options.global_rope_theta, hidden.dtype),
                  False: rotary_angles(position_ids, size, self.options.local_rope_theta, hidden.dtype)}
        head_mask = normalise_head_mask(head_mask, self.config)
        if head_mask is not None:
            head_mask = head_mask.to(hidden.device)
        layers = LayerCollector(hidden, output_attentions, output_qk, output_hidden_states, on_layer)
        for index, layer in enumerate(self.layers):
            mask = global_mask if layer.is_global else local_mask
            layer_head_mask = None if head_mask is None else head_mask[index]
            hidden, probes = layer(hidden, angles[layer.is_global], mask, layer_head_mask, layers.explicit)
            layers.add(index, hidden, probes)
        hidden = self.final_norm(hidden)                                                   # (B, S, H)
        if layers.hidden is not None:
            layers.hidden[-1] = hidden                   # as transformers: the last one after the final norm
        return layers.output(hidden, self.pooler(hidden, attention_mask) if self.pooler is not None else None)
