"""Attention maps of every head for one input, their statistics, and the same over checkpoints.

``attention(loaded, text)`` runs the model's explicit attention path (the softmax
probabilities, equal to ``transformers`` with ``attn_implementation="eager"``) and returns
an :class:`AttentionResult`: tokens, type ids, probabilities ``(L, nh, S, S)`` (row ``i`` =
where token ``i`` looks; each row sums to 1) and :class:`~engine.probes.attention.head_stats.HeadStats`.
``attention_over_checkpoints`` follows one head through a run's checkpoints. Plain numpy
out, no tensors.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.checks import is_whole_number
from engine.model.config import BertConfig
from engine.model.families.registry import attention_reach
from engine.probes.heads.fill_mask import model_mask_text
from engine.probes.heads.fill_mask_checkpoints import checkpoint_step
from engine.probes.attention.head_stats import STAT_NAMES, HeadStats, check_positions, layer_statistics
from engine.text.encoding import Encoding
from engine.text.segment_ids import uses_segment_ids


@dataclass
class AttentionResult:
    """Every head's attention for one input on one model."""

    text: str
    text_pair: str | None
    source: str                       # which model (LoadedModel.source)
    tokens: list[str]                 # S pieces, specials included
    input_ids: list[int]
    token_type_ids: list[int]
    special_mask: list[int]           # 1 for [CLS]/[SEP]
    attentions: np.ndarray            # (L, nh, S, S) float32 softmax probabilities; rows sum to 1
    stats: HeadStats                  # (L, nh) per statistic
    truncated: bool = False
    num_truncated_tokens: int = 0
    reach: tuple[int | None, ...] = ()  # per layer: tokens seen on each side (ModernBERT's local layers), None: all

    @property
    def num_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.attentions.shape[1])

    def head_map(self, layer: int, head: int) -> np.ndarray:
        """The (S, S) map of one head (indices checked)."""
        layer, head = check_head_index(self.num_layers, self.num_heads, layer, head)
        return self.attentions[layer, head]

    def special_names(self) -> tuple[str, str]:
        """The tokens the ``cls`` and ``sep`` statistics are about, as this input writes them (BERT's [CLS] and
        [SEP], RoBERTa's <s> and </s>): its first and last special token (words when it has none)."""
        specials = [token for token, special in zip(self.tokens, self.special_mask) if special]
        return (specials[0], specials[-1]) if specials else ("first special token", "separator")

    def records(self) -> list[dict[str, Any]]:
        """One row per head: layer, head and every statistic (pandas-friendly)."""
        return self.stats.records()

    def to_dict(self, layer: int, head: int) -> dict[str, Any]:
        """JSON-ready ``{tokens, layer, head, attention, stats, ...}`` for one head."""
        layer, head = check_head_index(self.num_layers, self.num_heads, layer, head)
        return {"tokens": list(self.tokens), "token_type_ids": list(self.token_type_ids), "layer": layer,
                "head": head, "attention": self.attentions[layer, head].astype(float).tolist(),
                "stats": self.stats.head(layer, head), "source": self.source, "text": self.text,
                "text_pair": self.text_pair}


@dataclass
class CheckpointAttention:
    """One head's map and statistics at each checkpoint (oldest first, in the order given)."""

    layer: int
    head: int
    labels: list[str]
    steps: list[int | None]
    tokens: list[list[str]]                       # per checkpoint (same tokenizer -> same tokens)
    maps: list[np.ndarray]                        # per checkpoint, (S, S)
    stats: dict[str, np.ndarray] = field(default_factory=dict)  # statistic -> (C,) for the chosen head
    all_stats: list[HeadStats] = field(default_factory=list)     # every head, per checkpoint


def check_head_index(num_layers: int, num_heads: int, layer: Any, head: Any) -> tuple[int, int]:
    """``(layer, head)`` as ints, or a ``ValueError`` naming the valid range (0-based)."""
    layer, head = _as_index(layer, "layer"), _as_index(head, "head")
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer} does not exist: this model has {num_layers} layers, numbered "
                         f"0 to {num_layers - 1}")
    if not 0 <= head < num_heads:
        raise ValueError(f"head {head} does not exist: each layer has {num_heads} heads, numbered "
                         f"0 to {num_heads - 1}")
    return layer, head


def encode_input(loaded: LoadedModel, text: str, text_pair: str | None = None,
                 max_length: int | None = None) -> Encoding:
    """Encode text (and pair) for ``loaded``, truncated to ``max_length`` (default: the model's positions); a typed
    ``[MASK]`` is the model's own mask token (RoBERTa's ``<mask>``: ``fill_mask.model_mask_text``), as in Fill-mask."""
    tokenizer = loaded.require_tokenizer()
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty: type a sentence to look at its attention")
    limit = loaded.config.max_tokens
    max_length = limit if max_length is None else _as_index(max_length, "max_length")
    if max_length > limit:
        raise ValueError(f"max_length {max_length} is longer than this model's {limit} positions")
    pair = text_pair if text_pair and text_pair.strip() else None
    return tokenizer.encode(model_mask_text(tokenizer, text), model_mask_text(tokenizer, pair), max_length=max_length)


def special_positions(loaded: LoadedModel, encoding: Encoding) -> tuple[list[int], list[int]]:
    """Positions of ``[CLS]`` and of ``[SEP]`` in ``encoding``."""
    tokenizer = loaded.tokenizer
    ids = encoding.input_ids
    return ([i for i, t in enumerate(ids) if t == tokenizer.cls_token_id],
            [i for i, t in enumerate(ids) if t == tokenizer.sep_token_id])


def model_inputs(loaded: LoadedModel, encoding: Encoding) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` and ``token_type_ids`` as (1, S) tensors on the model's device."""
    device = next(loaded.model.parameters()).device
    ids = torch.tensor([encoding.input_ids], device=device)                 # (1, S)
    types = torch.tensor([encoding.token_type_ids], device=device)          # (1, S)
    if not uses_segment_ids(loaded.config, loaded.tokenizer):
        types = torch.zeros_like(types)  # a model that takes no segment ids reads a pair as one segment
    return ids, types


class _Maps:
    """Fills one float32 ``(L, nh, S, S)`` array and the statistics layer by layer, as the encoder makes them."""

    def __init__(self, shape: tuple[int, int, int, int], cls_at: list[int], sep_at: list[int]) -> None:
        check_positions(shape[-1], cls_at, sep_at)
        self.attentions = np.empty(shape, dtype=np.float32)                  # (L, nh, S, S)
        self.found = {name: np.zeros(shape[:2]) for name in STAT_NAMES}       # name -> (L, nh)
        self.cls_at, self.sep_at = cls_at, sep_at

    def take(self, index: int, layer_probs: torch.Tensor) -> None:
        """Copy layer ``index``'s (1, nh, S, S) probabilities and compute its statistics (in torch)."""
        probs = layer_probs[0].float().cpu()                                   # (1, nh, S, S) -> (nh, S, S)
        if probs.shape[-1]:
            for name, values in layer_statistics(probs, self.cls_at, self.sep_at).items():
                self.found[name][index] = values.numpy()
        self.attentions[index] = probs.numpy()

    def result(self, loaded: LoadedModel, encoding: Encoding, text: str, text_pair: str | None) -> AttentionResult:
        pair = text_pair if text_pair and text_pair.strip() else None
        return AttentionResult(
            text=text, text_pair=pair, source=loaded.source, tokens=list(encoding.shown),
            input_ids=list(encoding.input_ids), token_type_ids=list(encoding.token_type_ids),
            special_mask=list(encoding.special_tokens_mask), attentions=self.attentions,
            stats=HeadStats(**self.found), truncated=encoding.truncated,
            num_truncated_tokens=encoding.num_truncated_tokens, reach=attention_reach(loaded.config),
        )


def attention(loaded: LoadedModel, text: str, text_pair: str | None = None,
              max_length: int | None = None) -> AttentionResult:
    """Every head's attention probabilities and statistics for ``text`` (and ``text_pair``).

    Each layer's maps are copied into one float32 ``(L, nh, S, S)`` array as the encoder makes them
    (``on_layer``), with that layer's statistics: the encoder never holds every layer's maps, and there is
    no stacked or float64 copy."""
    encoding = encode_input(loaded, text, text_pair, max_length)
    ids, types = model_inputs(loaded, encoding)
    config = loaded.config
    maps = _Maps((config.num_hidden_layers, config.num_attention_heads, ids.shape[1], ids.shape[1]),
                 *special_positions(loaded, encoding))
    with torch.inference_mode():
        loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=types, output_attentions=True,
                          on_layer=lambda index, probes: maps.take(index, probes["probs"]))
    return maps.result(loaded, encoding, text, text_pair)


def attention_result(loaded: LoadedModel, encoding: Encoding, layer_attentions: Sequence[torch.Tensor],
                     text: str, text_pair: str | None) -> AttentionResult:
    """The :class:`AttentionResult` of one encoded input from the encoder's per-layer probabilities
    (L of (1, nh, S, S)), for a caller that ran the model itself (with other outputs too).

    The maps are copied one layer at a time into one float32 ``(L, nh, S, S)`` array and each layer's
    statistics computed in torch as it goes; a ``list`` given is emptied as it is read (each layer's tensor
    let go once copied)."""
    num_layers = len(layer_attentions)
    shape = (num_layers, *layer_attentions[0].shape[1:]) if num_layers else (0, 0, 0, 0)
    maps = _Maps(shape, *special_positions(loaded, encoding))
    with torch.inference_mode():
        for index in range(num_layers):
            maps.take(index, layer_attentions[index])
            if isinstance(layer_attentions, list):
                layer_attentions[index] = None                                 # this layer's tensor can go
    return maps.result(loaded, encoding, text, text_pair)


def attention_over_checkpoints(models: Iterable[tuple[str, LoadedModel]], text: str, text_pair: str | None,
                               layer: int, head: int, steps: Sequence[int | None] | None = None,
                               max_length: int | None = None) -> CheckpointAttention:
    """Head ``(layer, head)`` at each checkpoint: its map and statistics, in the order given.

    ``models`` are ``(label, loaded)`` pairs, oldest first (a generator is fine: each model is
    used and let go before the next is taken); ``steps`` default to the step in each label
    (``"step-000200"`` -> 200; see ``fill_mask_checkpoints.checkpoint_step``).
    """
    result = CheckpointAttention(layer=-1, head=-1, labels=[], steps=[], tokens=[], maps=[])
    for index, (label, loaded) in enumerate(cancellation.checked(models)):   # a cancelled request loads no more
        layer_i, head_i = check_head_index(*_shape(loaded.config), layer, head)
        probe = attention(loaded, text, text_pair, max_length)
        del loaded
        if steps is not None and index >= len(steps):
            raise ValueError(f"{len(steps)} step(s) given for more checkpoints than that")
        result.layer, result.head = layer_i, head_i
        result.labels.append(str(label))
        result.steps.append(steps[index] if steps is not None else checkpoint_step(str(label)))
        result.tokens.append(probe.tokens)
        result.maps.append(probe.attentions[layer_i, head_i])
        result.all_stats.append(probe.stats)
    if not result.labels:
        raise ValueError("no checkpoints given: a training run writes them as it goes")
    if steps is not None and len(steps) != len(result.labels):
        raise ValueError(f"{len(steps)} step(s) given for {len(result.labels)} checkpoints")
    result.stats = {name: np.array([s.get(name)[result.layer, result.head] for s in result.all_stats])
                    for name in STAT_NAMES}                                     # name -> (C,)
    return result


def _shape(config: BertConfig) -> tuple[int, int]:
    return config.num_hidden_layers, config.num_attention_heads


def _as_index(value: Any, name: str) -> int:
    """An int from an int or an integral float (sliders send 3.0); else a clear error."""
    if not is_whole_number(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return int(value)
