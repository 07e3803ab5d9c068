"""DeBERTa-v2/v3's own hyper-parameters (``BertConfig.family_options``), under transformers' names, typed and checked.

``DebertaOptions.read`` takes them from a ``config.json`` (or ``family_options``) dict with transformers' defaults
(``DebertaV2Config``) and refuses, with one sentence naming the field, what this project cannot compute the same
way; ``to_hf`` writes them back. The model (``engine/model/deberta_model.py``) reads them through
:func:`deberta_options`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.checks import is_finite_number, is_int
from engine.model.config import SUPPORTED_ACTIVATIONS, BertConfig

POSITION_TERMS = ("c2p", "p2c")        # content-to-position, position-to-content: the terms transformers computes
REL_NORMS = ("none", "layer_norm")     # norm_rel_ebd's parts


def _bool(data: Mapping[str, Any], name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"DeBERTa's {name} must be true or false, got {str(value)[:60]!r}")
    return value


def _int(data: Mapping[str, Any], name: str, default: int) -> int:
    value = data.get(name, default)
    if not is_int(value) or abs(value) > 1 << 20:
        raise ValueError(f"DeBERTa's {name} must be a whole number (at most 1,048,576), got {str(value)[:60]!r}")
    return int(value)


def _rate(data: Mapping[str, Any], name: str, default: float) -> float:
    value = data.get(name, default)
    if not is_finite_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"DeBERTa's {name} must be in [0, 1), got {str(value)[:60]!r}")
    return float(value)


def _activation(data: Mapping[str, Any], name: str, default: str) -> str:
    value = data.get(name, default)
    if value not in SUPPORTED_ACTIVATIONS:
        raise ValueError(f"DeBERTa's {name} {str(value)[:60]!r} is not one this app computes; "
                         f"supported: {', '.join(SUPPORTED_ACTIVATIONS)}")
    return str(value)


def _parts(data: Mapping[str, Any], name: str, default: Any, known: tuple[str, ...]) -> tuple[str, ...]:
    """A ``"a|b"`` string or a list of strings as a tuple of known parts, lower case, each once."""
    value = data.get(name, default)
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split("|")
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"DeBERTa's {name} must be a list of names or a '|'-separated string, got "
                         f"{str(value)[:60]!r}")
    parts = tuple(dict.fromkeys(v.strip().lower() for v in value if v.strip()))
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise ValueError(f"DeBERTa's {name} holds {', '.join(map(repr, unknown))[:80]}, which this app does not "
                         f"compute; it reads {', '.join(map(repr, known))}")
    return parts


@dataclass(frozen=True)
class DebertaOptions:
    """What DeBERTa-v2/v3 adds to BERT's hyper-parameters, as transformers names them."""

    relative_attention: bool = False
    max_relative_positions: int = -1        # < 1: max_position_embeddings
    position_buckets: int = -1              # > 0: relative distances in log buckets, this many a side
    pos_att_type: tuple[str, ...] = ()      # which disentangled terms: "c2p", "p2c"
    share_att_key: bool = False             # the position terms reuse query_proj / key_proj
    position_biased_input: bool = True      # absolute position embeddings added to the input
    norm_rel_ebd: tuple[str, ...] = ("none",)
    conv_kernel_size: int = 0               # > 0: a convolution beside the first layer (ConvLayer)
    conv_groups: int = 1
    conv_act: str = "tanh"
    pooler_dropout: float = 0.0
    pooler_hidden_act: str = "gelu"

    @classmethod
    def read(cls, data: Mapping[str, Any], max_position_embeddings: int, hidden_size: int) -> "DebertaOptions":
        """The options of a ``config.json`` dict (transformers' defaults for what it lacks); ``ValueError``
        naming the field that cannot be computed."""
        options = cls(
            relative_attention=_bool(data, "relative_attention", False),
            max_relative_positions=_int(data, "max_relative_positions", -1),
            position_buckets=_int(data, "position_buckets", -1),
            pos_att_type=_parts(data, "pos_att_type", None, POSITION_TERMS),
            share_att_key=_bool(data, "share_att_key", False),
            position_biased_input=_bool(data, "position_biased_input", True),
            norm_rel_ebd=_parts(data, "norm_rel_ebd", "none", REL_NORMS) or ("none",),
            conv_kernel_size=_int(data, "conv_kernel_size", 0),
            conv_groups=_int(data, "conv_groups", 1),
            conv_act=_activation(data, "conv_act", "tanh"),
            pooler_dropout=_rate(data, "pooler_dropout", 0.0),
            pooler_hidden_act=_activation(data, "pooler_hidden_act", "gelu"),
        )
        options.check(max_position_embeddings, hidden_size)
        return options

    def check(self, max_position_embeddings: int, hidden_size: int) -> None:
        """``ValueError`` with a sentence when the relative positions or the convolution cannot be built."""
        if self.relative_attention and self.position_buckets > 0:
            span = self.max_span(max_position_embeddings)
            if self.position_buckets < 2 or span <= self.position_buckets // 2 + 1:
                raise ValueError(f"DeBERTa's position_buckets ({self.position_buckets}) must be at least 2 and leave "
                                 f"room below max_relative_positions ({span}) for the log buckets "
                                 "(max_relative_positions > position_buckets / 2 + 1)")
        if self.conv_kernel_size < 0 or (self.conv_kernel_size > 0 and self.conv_kernel_size % 2 == 0):
            raise ValueError(f"DeBERTa's conv_kernel_size must be 0 or an odd number (the convolution keeps the "
                             f"length), got {self.conv_kernel_size}")
        if self.conv_kernel_size and (self.conv_groups < 1 or hidden_size % self.conv_groups):
            raise ValueError(f"DeBERTa's conv_groups ({self.conv_groups}) must divide hidden_size ({hidden_size})")

    def max_span(self, max_position_embeddings: int) -> int:
        """The largest relative distance told apart: ``max_relative_positions``, else ``max_position_embeddings``."""
        return self.max_relative_positions if self.max_relative_positions >= 1 else max_position_embeddings

    def span(self, max_position_embeddings: int) -> int:
        """Relative embeddings a side (``rel_embeddings`` has twice as many rows): the buckets, else ``max_span``."""
        return self.position_buckets if self.position_buckets > 0 else self.max_span(max_position_embeddings)

    @property
    def scale_terms(self) -> int:
        """How many terms the scores add up (content plus each position term): they are scaled by
        1 / sqrt(hd * scale_terms), whether or not relative attention is on, as transformers does."""
        return 1 + len(self.pos_att_type)

    @property
    def rel_layer_norm(self) -> bool:
        """Whether the relative embeddings go through the encoder's ``LayerNorm`` (norm_rel_ebd "layer_norm")."""
        return "layer_norm" in self.norm_rel_ebd

    def to_hf(self) -> dict[str, Any]:
        """These options as ``config.json`` fields, under transformers' names."""
        return {"relative_attention": self.relative_attention, "max_relative_positions": self.max_relative_positions,
                "position_buckets": self.position_buckets, "pos_att_type": list(self.pos_att_type),
                "share_att_key": self.share_att_key, "position_biased_input": self.position_biased_input,
                "norm_rel_ebd": "|".join(self.norm_rel_ebd), "conv_kernel_size": self.conv_kernel_size,
                "conv_groups": self.conv_groups, "conv_act": self.conv_act, "pooler_dropout": self.pooler_dropout,
                "pooler_hidden_act": self.pooler_hidden_act}


def deberta_options(config: BertConfig) -> DebertaOptions:
    """``config.family_options`` read and checked as DeBERTa's (``ValueError`` naming a bad field)."""
    return DebertaOptions.read(config.family_options, config.max_position_embeddings, config.hidden_size)
