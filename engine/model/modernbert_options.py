"""ModernBERT's own hyper-parameters (``BertConfig.family_options``), under transformers' names, typed and checked.

``ModernBertOptions.read`` takes them from a ``config.json`` dict or from ``family_options`` (the same names), with
transformers' defaults (``ModernBertConfig``): which layers attend globally (``layer_types``, or the older
``global_attn_every_n_layers``), the rotary bases (``rope_parameters``, or ``global_rope_theta`` /
``local_rope_theta``), the local window, which linear and norm layers carry biases, the heads' activation, pooling
and dropouts. What this project cannot compute the same way is refused with one sentence naming the field; ``to_hf``
writes them back in both spellings, so transformers 4.x and 5.x read the same model. The model
(``engine/model/modernbert_model.py``) reads them through :func:`modernbert_options`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.checks import is_finite_number, is_int
from engine.model.config import SUPPORTED_ACTIVATIONS, BertConfig

GLOBAL, LOCAL = "full_attention", "sliding_attention"       # transformers' layer types
POOLINGS = ("cls", "mean")
MAX_LAYERS = 4096                   # a config.json's layer count is checked before a list of that many is made
BIASES = ("norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias")
# config.json fields that change no number this project computes: kept as they are and written back
KEPT = ("bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id", "initializer_cutoff_factor",
        "deterministic_flash_attn", "sparse_prediction", "sparse_pred_ignore_index")
# names read from a config.json or family_options besides the dataclass's own fields
SPELLINGS = ("global_attn_every_n_layers", "rope_parameters", "rope_scaling", "reference_compile")


def _bool(data: Mapping[str, Any], name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"ModernBERT's {name} must be true or false, got {str(value)[:60]!r}")
    return value


def _positive_int(data: Mapping[str, Any], name: str, default: int) -> int:
    value = data.get(name, default)
    if not is_int(value) or not 0 < value <= 1 << 24:
        raise ValueError(f"ModernBERT's {name} must be a positive whole number (at most 16,777,216), "
                         f"got {str(value)[:60]!r}")
    return int(value)


def _rate(data: Mapping[str, Any], name: str, default: float) -> float:
    value = data.get(name, default)
    if not is_finite_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"ModernBERT's {name} must be in [0, 1), got {str(value)[:60]!r}")
    return float(value)


def _theta(value: Any, name: str) -> float:
    if not is_finite_number(value) or not 1.0 < value <= 1e12:
        raise ValueError(f"ModernBERT's {name} (a rotary base) must be a number above 1, got {str(value)[:60]!r}")
    return float(value)


def _layer_types(data: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    """Each layer's attention: ``layer_types`` when given, else every ``global_attn_every_n_layers``-th global."""
    if layers > MAX_LAYERS:
        raise ValueError(f"ModernBERT's num_hidden_layers ({layers:,}) is more than this app builds ({MAX_LAYERS:,})")
    value = data.get("layer_types")
    if value is None:
        every = _positive_int(data, "global_attn_every_n_layers", 3)
        return tuple(GLOBAL if i % every == 0 else LOCAL for i in range(layers))
    if not isinstance(value, list | tuple) or not all(v in (GLOBAL, LOCAL) for v in value):
        raise ValueError(f"ModernBERT's layer_types must list {GLOBAL!r} or {LOCAL!r} for each layer, "
                         f"got {str(value)[:80]!r}")
    if len(value) != layers:
        raise ValueError(f"ModernBERT's layer_types names {len(value)} layers, but num_hidden_layers is {layers}")
    return tuple(value)


def _thetas(data: Mapping[str, Any]) -> tuple[float, float]:
    """(global, local) rotary bases from ``rope_parameters`` (transformers 5) or the older two fields; another
    ``rope_type`` than ``default``, or a ``rope_scaling``, is refused."""
    if data.get("rope_scaling") is not None:
        raise ValueError("this ModernBERT scales its rotary positions (rope_scaling), which this app does not "
                         "compute; it reads ModernBERTs with plain rotary positions")
    rope = data.get("rope_parameters") or {}
    if not isinstance(rope, Mapping):
        raise ValueError(f"ModernBERT's rope_parameters must map layer types to settings, got {str(rope)[:60]!r}")
    thetas = []
    for kind, older, default in ((GLOBAL, "global_rope_theta", 160_000.0), (LOCAL, "local_rope_theta", 10_000.0)):
        settings = rope.get(kind) or {}
        if not isinstance(settings, Mapping):
            raise ValueError(f"ModernBERT's rope_parameters[{kind!r}] must be a mapping, got {str(settings)[:60]!r}")
        if settings.get("rope_type", "default") != "default":
            raise ValueError(f"this ModernBERT's {kind} layers use rope_type {str(settings['rope_type'])[:40]!r}, "
                             "which this app does not compute; it reads the 'default' rotary positions")
        thetas.append(_theta(settings.get("rope_theta", data.get(older, default)), older))
    return thetas[0], thetas[1]


def _kept(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``KEPT`` fields present, each a JSON scalar or a list of whole numbers (``eos_token_id``)."""
    kept = {}
    for name in (n for n in KEPT if n in data):
        value = data[name]
        scalar = value is None or isinstance(value, bool) or is_finite_number(value)
        if not scalar and not (isinstance(value, list) and all(is_int(v) for v in value)):
            raise ValueError(f"ModernBERT's {name} must be a number, true/false or null, got {str(value)[:60]!r}")
        kept[name] = value
    return kept


@dataclass(frozen=True)
class ModernBertOptions:
    """What ModernBERT adds to BERT's hyper-parameters, as transformers names them."""

    layer_types: tuple[str, ...]             # per layer: GLOBAL (every position) or LOCAL (the window)
    global_rope_theta: float = 160_000.0     # the rotary base of the global layers
    local_rope_theta: float = 10_000.0       # ... of the local ones
    local_attention: int = 128               # the window: a local layer sees positions within local_attention // 2
    embedding_dropout: float = 0.0
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    decoder_bias: bool = True                # the masked-LM decoder's bias
    classifier_bias: bool = False            # the prediction head's dense layer's bias (every task head's)
    classifier_activation: str = "gelu"      # the prediction head's activation
    classifier_pooling: str = "cls"          # sequence classification: the first token, or the mean of the real ones
    kept: dict[str, Any] = field(default_factory=dict)   # KEPT fields present, written back as they are

    @classmethod
    def read(cls, data: Mapping[str, Any], num_hidden_layers: int, strict: bool = False) -> "ModernBertOptions":
        """The options of a ``config.json`` dict (or ``family_options``; ``strict``: an unknown name is refused),
        transformers' defaults for what it lacks; ``ValueError`` naming the field this app cannot compute."""
        if strict:
            unknown = sorted(set(data) - {f for f in cls.__dataclass_fields__ if f != "kept"} - set(KEPT)
                             - set(SPELLINGS))
            if unknown:
                raise ValueError(f"ModernBERT has no option {unknown[0][:60]!r}; its options are "
                                 f"{', '.join(n for n in cls.__dataclass_fields__ if n != 'kept')}")
        activation = data.get("classifier_activation", "gelu")
        if activation not in SUPPORTED_ACTIVATIONS:
            raise ValueError(f"ModernBERT's classifier_activation {str(activation)[:60]!r} is not one this app "
                             f"computes; supported: {', '.join(SUPPORTED_ACTIVATIONS)}")
        pooling = data.get("classifier_pooling", "cls")
        if pooling not in POOLINGS:
            raise ValueError(f"ModernBERT's classifier_pooling must be 'cls' or 'mean', got {str(pooling)[:60]!r}")
        global_theta, local_theta = _thetas(data)
        return cls(layer_types=_layer_types(data, num_hidden_layers), global_rope_theta=global_theta,
                   local_rope_theta=local_theta, local_attention=_positive_int(data, "local_attention", 128),
                   embedding_dropout=_rate(data, "embedding_dropout", 0.0),
                   **{name: _bool(data, name, name == "decoder_bias") for name in BIASES},
                   classifier_activation=str(activation), classifier_pooling=str(pooling), kept=_kept(data))

    @property
    def window(self) -> int:
        """How far a local layer sees: positions i and j attend when |i - j| <= window (transformers'
        ``sliding_window``, half of ``local_attention``)."""
        return self.local_attention // 2

    def is_global(self, layer: int) -> bool:
        """Whether layer ``layer`` (from 0) attends to every position."""
        return self.layer_types[layer] == GLOBAL

    def family_options(self) -> dict[str, Any]:
        """These options as ``BertConfig.family_options`` (read back by :meth:`read`)."""
        data = asdict(self)
        kept = data.pop("kept")
        return {**data, "layer_types": list(self.layer_types), **kept}

    def to_hf(self) -> dict[str, Any]:
        """These options as ``config.json`` fields: transformers 5's ``layer_types`` and ``rope_parameters`` and
        the older ``global_attn_every_n_layers`` (when the layers follow one) and rotary bases."""
        data = self.family_options()
        data["rope_parameters"] = {GLOBAL: {"rope_type": "default", "rope_theta": self.global_rope_theta},
                                   LOCAL: {"rope_type": "default", "rope_theta": self.local_rope_theta}}
        every = next((n for n in range(1, len(self.layer_types) + 1)
                      if self.layer_types == tuple(GLOBAL if i % n == 0 else LOCAL
                                                   for i in range(len(self.layer_types)))), None)
        if every is not None:
            data["global_attn_every_n_layers"] = every
        return data


def modernbert_options(config: BertConfig) -> ModernBertOptions:
    """``config.family_options`` read and checked as ModernBERT's (``ValueError`` naming a bad field)."""
    return ModernBertOptions.read(config.family_options, config.num_hidden_layers, strict=True)
