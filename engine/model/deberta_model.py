"""DeBERTa-v2/v3's base model in our own PyTorch: embeddings, post-LN layers of disentangled attention over shared
relative embeddings, an optional convolution beside the first layer, and its pooler (``ContextPooler``).

What differs from BERT (``engine/model/encoder.py``), as ``transformers``' DeBERTa-v2 computes it:

* **embeddings**: words (width E), absolute positions only with ``position_biased_input``, token types only when
  ``type_vocab_size`` > 0, projected to H by ``embed_proj`` (no bias) when E != H, then LayerNorm, then zeroed at
  padding (the mask multiplies them);
* **attention**: ``engine/model/deberta_attention.py``; the relative embeddings (``encoder.rel_embeddings``, with
  ``encoder.LayerNorm`` when ``norm_rel_ebd`` says ``layer_norm``) and the distance index are made once a pass
  and read by every layer;
* **ConvLayer** (``conv_kernel_size`` > 0): after the first layer, ``LayerNorm(layer output + act(conv(the
  embeddings)))``, padding zeroed;
* **pooler**: ``act(dense(h[:, 0]))`` with ``pooler_hidden_act`` (no tanh), under transformers' top-level
  ``pooler.`` (renamed by ``families/deberta.py``).

The feed-forward part and both residual LayerNorms are BERT's modules (same names). Module names equal
transformers', so a state dict maps one to one under ``deberta.``.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from engine.model.config import BertConfig
from engine.model.deberta_attention import DisentangledSelfAttention, relative_index
from engine.model.deberta_options import DebertaOptions, deberta_options
from engine.model.encoder import BertDenseResidualNorm, BertIntermediate, activation, normalise_head_mask
from engine.model.outputs import EncoderOutput, LayerCollector


class DebertaEmbeddings(nn.Module):
    """LayerNorm(embed_proj(word [+ position] [+ token type])) times the mask, then dropout."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        width = config.embedding_width
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        self.position_embeddings = (nn.Embedding(config.max_position_embeddings, width)
                                    if options.position_biased_input else None)
        self.token_type_embeddings = (nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size
                                      else None)
        self.embed_proj = nn.Linear(width, config.hidden_size, bias=False) if config.embedding_size else None
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def parts(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
              position_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The summands (word, absolute position, token type), each (B, S, E); zeros for a table the model does
        not have (without ``position_biased_input`` positions enter inside attention only)."""
        seq_len = input_ids.shape[1]
        word = self.word_embeddings(input_ids)                                       # (B, S, E)
        position = token_type = torch.zeros_like(word)
        if self.position_embeddings is not None:
            if seq_len > self.position_embeddings.num_embeddings:
                raise ValueError(f"sequence of {seq_len} tokens is longer than the "
                                 f"{self.position_embeddings.num_embeddings} positions the model has "
                                 "(max_position_embeddings)")
            if position_ids is None:
                position_ids = torch.arange(seq_len, device=input_ids.device)[None, :]   # (1, S)
            position = self.position_embeddings(position_ids)                        # (B, S, E)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            token_type = self.token_type_embeddings(token_type_ids)                  # (B, S, E)
        return word, position, token_type

    def finish(self, summed: torch.Tensor) -> torch.Tensor:
        """The embedding output of the summands' sum (before the padding mask and dropout): LayerNorm, after
        ``embed_proj`` when E != H."""
        if self.embed_proj is not None:
            summed = self.embed_proj(summed)                                         # (B, S, H)
        return self.LayerNorm(summed)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, S) ids -> (B, S, H); ``mask`` (B, S) 1-keep/0-pad zeroes the padding's vectors."""
        word, position, token_type = self.parts(input_ids, token_type_ids, position_ids)
        hidden = self.finish(word + position + token_type)                          # (B, S, H)
        if mask is not None:
            hidden = hidden * mask[:, :, None].to(hidden.dtype)                      # (B, S, 1)
        return self.dropout(hidden)


class ConvLayer(nn.Module):
    """DeBERTa-v2's convolution beside the first layer: ``LayerNorm(residual + act(conv(x)))``, padding zeroed."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        size = options.conv_kernel_size
        self.conv = nn.Conv1d(config.hidden_size, config.hidden_size, size, padding=(size - 1) // 2,
                              groups=options.conv_groups)
        self.act = activation(options.conv_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``x`` the first layer's input, ``residual`` its output, both (B, S, H); ``mask`` (B, S) or None."""
        out = self.conv(x.transpose(1, 2)).transpose(1, 2)                           # (B, H, S) -> (B, S, H)
        keep = None if mask is None else mask[:, :, None].to(out.dtype)              # (B, S, 1)
        if keep is not None:
            out = out.masked_fill(keep == 0, 0.0)
        out = self.LayerNorm(residual + self.act(self.dropout(out)))
        return out if keep is None else out * keep


class DebertaAttention(nn.Module):
    """Disentangled self-attention, then BERT's dense + residual LayerNorm (``output``)."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        self.self = DisentangledSelfAttention(config, options)
        self.output = BertDenseResidualNorm(config, config.hidden_size)


class DebertaLayer(nn.Module):
    """One post-LN block: disentangled attention, then BERT's feed-forward sub-layer."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        self.attention = DebertaAttention(config, options)
        self.intermediate = BertIntermediate(config)
        self.output = BertDenseResidualNorm(config, config.intermediate_size)

    def forward(self, hidden: torch.Tensor, keep: torch.Tensor | None, rel_embeddings: torch.Tensor | None,
                index: torch.Tensor | None, head_mask: torch.Tensor | None = None,
                explicit: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(B, S, H) -> (B, S, H), and the attention's probes (empty unless ``explicit``)."""
        context, probes = self.attention.self(hidden, keep, rel_embeddings, index, head_mask, explicit)
        attended = self.attention.output(context, hidden)                            # (B, S, H)
        return self.output(self.intermediate(attended), attended), probes            # (B, S, I) -> (B, S, H)


class DebertaEncoder(nn.Module):
    """The layers, the relative embeddings they share (and their LayerNorm), and the optional ConvLayer."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        self.options = options
        self.max_span = options.max_span(config.max_position_embeddings)
        self.span = options.span(config.max_position_embeddings)
        self.layer = nn.ModuleList(DebertaLayer(config, options) for _ in range(config.num_hidden_layers))
        if options.relative_attention:
            self.rel_embeddings = nn.Embedding(2 * self.span, config.hidden_size)
        if options.rel_layer_norm:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.conv = ConvLayer(config, options) if options.conv_kernel_size > 0 else None

    def layers(self) -> list[DebertaLayer]:
        """The layers in order."""
        return list(self.layer)

    def relative(self, seq_len: int, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The relative embeddings (2 span, H), normalised if so configured, and the (S, S) index ``δ``; Nones
        without relative attention."""
        if not self.options.relative_attention:
            return None, None
        table = self.rel_embeddings.weight                                           # (2 span, H)
        if self.options.rel_layer_norm:
            table = self.LayerNorm(table)
        index = relative_index(seq_len, self.span, self.options.position_buckets, self.max_span, device)
        return table, index


class ContextPooler(nn.Module):
    """DeBERTa's pooler: ``act(dense(dropout(h[:, 0])))`` with ``pooler_hidden_act``."""

    def __init__(self, config: BertConfig, options: DebertaOptions) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(options.pooler_dropout)
        self.act = activation(options.pooler_hidden_act)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(self.dropout(hidden[:, 0])))                      # (B, H)


class DebertaModel(nn.Module):
    """Embeddings, L disentangled-attention layers and (optionally) the pooler; ``BertModel``'s call and output."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        options = deberta_options(config)
        self.config = config
        self.embeddings = DebertaEmbeddings(config, options)
        self.encoder = DebertaEncoder(config, options)
        self.pooler = ContextPooler(config, options) if add_pooling_layer else None

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
        """Encode a batch as ``BertModel.forward`` does (the same arguments, outputs and ``on_layer`` contract):
        ``output_attentions`` / ``output_qk`` take the explicit path; ``attention_scores`` are the full
        disentangled scores (content + c2p + p2c, scaled, masked), ``queries`` / ``keys`` the content ones."""
        _, seq_len = input_ids.shape
        mask = None if attention_mask is None or bool(attention_mask.all()) else attention_mask
        hidden = self.embeddings(input_ids, token_type_ids, position_ids, mask)     # (B, S, H)
        keep = None
        if mask is not None:
            real = mask.bool()
            keep = real[:, None, :, None] & real[:, None, None, :]                   # (B, 1, S, S)
        rel_embeddings, index = self.encoder.relative(seq_len, hidden.device)
        head_mask = normalise_head_mask(head_mask, self.config)
        if head_mask is not None:
            head_mask = head_mask.to(hidden.device)
        layers = LayerCollector(hidden, output_attentions, output_qk, output_hidden_states, on_layer)
        first_input = hidden
        for number, layer in enumerate(self.encoder.layers()):
            layer_head_mask = None if head_mask is None else head_mask[number]
            hidden, probes = layer(hidden, keep, rel_embeddings, index, layer_head_mask, layers.explicit)
            if number == 0 and self.encoder.conv is not None:
                hidden = self.encoder.conv(first_input, hidden, mask)                # (B, S, H)
            layers.add(number, hidden, probes)
        return layers.output(hidden, self.pooler(hidden) if self.pooler is not None else None)


def build_deberta(config: BertConfig, add_pooling_layer: bool) -> DebertaModel:
    """The DeBERTa base model of ``config`` (``Family.build_base``)."""
    return DebertaModel(config, add_pooling_layer)
