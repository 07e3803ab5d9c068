"""BertConfig: the model's hyper-parameters, with Hugging Face field names.

Read and written as a Hugging Face ``config.json`` (``model_type: "bert"``), so a
directory we export is a directory ``transformers`` can load, and vice versa.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.checks import is_finite_number, is_int
from engine.regular_files import read_bytes

MAX_CONFIG_BYTES = 4 << 20
# fields a family sets (engine/model/families); BERT's config.json never carries them
FAMILY_FIELDS = ("embedding_size", "num_hidden_groups", "position_offset", "family_options")
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")


@dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder; field names match ``transformers.BertConfig``."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int = 0
    classifier_dropout: float | None = None
    id2label: dict[int, str] = field(default_factory=lambda: {0: "LABEL_0", 1: "LABEL_1"})
    architectures: list[str] | None = None
    # What a family changes in the shared parts (engine/model/families; BERT keeps every default):
    model_type: str = "bert"                 # the family's config.json model_type
    embedding_size: int | None = None        # ALBERT, ELECTRA: embeddings this wide, projected to hidden_size
    num_hidden_groups: int | None = None     # ALBERT: the layers share the weights of this many groups
    position_offset: int = 0                 # RoBERTa, XLM-R: positions count from pad_token_id + 1 (not written)
    # A family's own hyper-parameters under transformers' names (ModernBERT's ``global_rope_theta``, DeBERTa's
    # ``position_buckets``), read and validated by its module; never written by ``to_dict`` (the family writes them)
    family_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # JSON object keys are strings; normalise id2label to int keys.
        if self.pad_token_id is None:  # some HF configs write null; BERT's [PAD] is id 0
            self.pad_token_id = 0
        try:
            self.id2label = {int(k): str(v) for k, v in dict(self.id2label).items()}
        except (TypeError, ValueError):
            raise ValueError(f"id2label must map integer class ids to names, got {self.id2label!r}") from None
        self.validate()

    @property
    def num_labels(self) -> int:
        """Number of classes of the sequence-classification head."""
        return len(self.id2label)

    @property
    def label2id(self) -> dict[str, int]:
        return {v: k for k, v in self.id2label.items()}

    @property
    def embedding_width(self) -> int:
        """Width of the embeddings (E): ``embedding_size`` when the family factorises them, else H."""
        return self.embedding_size or self.hidden_size

    @property
    def max_tokens(self) -> int:
        """The longest input the position embeddings cover: ``max_position_embeddings`` less the offset."""
        return self.max_position_embeddings - self.position_offset

    @property
    def head_size(self) -> int:
        """Width of one attention head (hd)."""
        return self.hidden_size // self.num_attention_heads

    def validate(self) -> None:
        """Raise ``ValueError`` with a readable message if the values cannot make a BERT."""
        positive = (
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings",
        )
        for name in positive:
            value = getattr(self, name)
            if not is_int(value) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not is_int(self.type_vocab_size) or self.type_vocab_size < 0:     # 0: no segment embeddings
            raise ValueError(f"type_vocab_size must be 0 or a positive integer, got {self.type_vocab_size!r}")
        for name in ("embedding_size", "num_hidden_groups"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.num_hidden_groups is not None and self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(f"num_hidden_layers ({self.num_hidden_layers}) must be a multiple of num_hidden_groups "
                             f"({self.num_hidden_groups}): each group serves the same number of layers")
        if not is_int(self.position_offset) or not 0 <= self.position_offset < self.max_position_embeddings:
            raise ValueError(f"position_offset must be in [0, max_position_embeddings), got {self.position_offset!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}); each head gets hidden_size / heads dimensions"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"unknown hidden_act {self.hidden_act!r}; supported: {', '.join(SUPPORTED_ACTIVATIONS)}"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is None and name == "classifier_dropout":
                continue
            if not is_finite_number(value) or not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if not is_finite_number(value) or not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be a positive number below 1, got {value!r}")
        if not is_int(self.pad_token_id) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id must be in [0, vocab_size), got {self.pad_token_id!r}")
        if not self.id2label:
            raise ValueError("id2label must name at least one class")
        if not isinstance(self.family_options, dict):
            raise ValueError(f"family_options must be a dict, got {type(self.family_options).__name__}")

    # ---- Hugging Face config.json -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``config.json`` content (``model_type: bert``) ``transformers`` reads."""
        data = dataclasses.asdict(self)
        for name in FAMILY_FIELDS:                  # the families' own, written by them
            del data[name]
        data["id2label"] = {str(k): v for k, v in self.id2label.items()}
        data["label2id"] = self.label2id
        data["model_type"] = "bert"
        data["position_embedding_type"] = "absolute"
        data["tie_word_embeddings"] = True
        if data["architectures"] is None:
            del data["architectures"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BertConfig":
        """Build from a ``config.json`` dict; unknown HF fields are ignored, wrong model types refused."""
        model_type = data.get("model_type", "bert")
        if model_type != "bert":          # the other families: engine.model.families.config_from_dict
            raise ValueError(f"config.json has model_type {model_type!r}, not 'bert'")
        pos = data.get("position_embedding_type", "absolute")
        if pos != "absolute":
            raise ValueError(f"position_embedding_type {pos!r} is not supported (only 'absolute')")
        if data.get("is_decoder"):
            raise ValueError("decoder (causal) BERT configs are not supported; this app explores encoders")
        names = {f.name for f in dataclasses.fields(cls)} - set(FAMILY_FIELDS)
        kwargs = {k: v for k, v in data.items() if k in names}
        if "id2label" not in kwargs and isinstance(data.get("num_labels"), int) and data["num_labels"] > 0:
            kwargs["id2label"] = {i: f"LABEL_{i}" for i in range(data["num_labels"])}
        return cls(**kwargs)

    def save(self, directory: str | Path) -> Path:
        """Write ``config.json`` into ``directory``; returns its path."""
        path = Path(directory) / "config.json"
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "BertConfig":
        """Read a BERT's ``config.json`` file (or the one inside a directory); any family's:
        ``engine.model.families.registry.load_config``."""
        return cls.from_dict(read_config_json(path))

    def replace(self, **changes: Any) -> "BertConfig":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def read_config_json(path: str | Path) -> dict[str, Any]:
    """The JSON object of a ``config.json`` file (or the one inside a directory): a regular file, size-capped;
    ``FileNotFoundError`` / ``ValueError`` naming it."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(read_bytes(path, MAX_CONFIG_BYTES))     # a regular file, size-capped
    except FileNotFoundError:
        raise FileNotFoundError(f"no config.json at {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return data


# (layers, hidden, heads, intermediate): the sizes of Turc et al.'s compact BERTs and the paper's two.
PRESETS: dict[str, tuple[int, int, int, int]] = {
    "tiny": (2, 128, 2, 512),
    "mini": (4, 256, 4, 1024),
    "small": (4, 512, 8, 2048),
    "medium": (8, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}


def preset(name: str, **overrides: Any) -> BertConfig:
    """A named size (tiny, mini, small, medium, base, large), optionally with overrides."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    layers, hidden, heads, intermediate = PRESETS[name]
    values = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                  intermediate_size=intermediate)
    values.update(overrides)
    return BertConfig(**values)
