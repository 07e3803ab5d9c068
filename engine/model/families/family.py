"""What one family declares (docs/design/families.md): its ``config.json`` both ways, its weight names both ways
(``Renames``: prefix templates between transformers' layout and the shared one, BERT's), and transformers' class
names for it. The shared parts (``engine/model``) read only ``BertConfig`` fields; a family sets them.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from engine.model.config import BertConfig
from engine.model.head_specs import HeadSpec

NUMBER = "{n}"                      # a layer or group number in a template: the same on both sides


def _pattern(template: str) -> re.Pattern[str]:
    """``template`` as a regular expression matching a key's start: ``{n}`` is a number, captured."""
    return re.compile("^" + re.escape(template).replace(re.escape(NUMBER), r"(\d+)"))


@dataclass(frozen=True)
class Renames:
    """Pairs of key-prefix templates, (transformers', ours); ours None: a key dropped on reading (a tied copy, or
    a head this project does not read yet). The first pair whose prefix matches renames a key; a key no pair
    matches keeps its name."""

    pairs: tuple[tuple[str, str | None], ...]

    def to_ours(self, key: str) -> str | None:
        """``key`` of transformers' layout in the shared one; None when it is dropped."""
        return self._rename(key, ((theirs, ours) for theirs, ours in self.pairs), keep_dropped=False)

    def to_theirs(self, key: str) -> str | None:
        """``key`` of the shared layout in transformers'; None when the family writes no such key."""
        return self._rename(key, ((ours, theirs) for theirs, ours in self.pairs if ours is not None),
                            keep_dropped=True)

    @staticmethod
    def _rename(key: str, pairs: Iterable[tuple[str, str | None]], keep_dropped: bool) -> str | None:
        for source, target in pairs:
            found = _pattern(source).match(key)
            if not found:
                continue
            if target is None:
                return None
            renamed = target
            for number in found.groups():
                renamed = renamed.replace(NUMBER, number, 1)
            return renamed + key[found.end():]
        return key


@dataclass(frozen=True)
class Family:
    """One family: its name for people, its ``model_type`` values, transformers' class-name stem (``Roberta``:
    ``RobertaForMaskedLM``), how its ``config.json`` becomes a ``BertConfig`` and back, and its key renames."""

    name: str
    model_types: tuple[str, ...]
    class_stem: str
    config_from_hf: Callable[[dict[str, Any]], BertConfig]
    config_to_hf: Callable[[BertConfig], dict[str, Any]]
    renames: Renames = field(default_factory=lambda: Renames(()))
    base_prefix: str = "bert."      # transformers' prefix of the base model in its task classes ("roberta.")
    # transformers classes whose head this project reads, by their BERT name's suffix ("ForMaskedLM")
    classes: tuple[str, ...] = ("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "Model")
    # (a prefix, another): when a key starts with the first, keys starting with the second are dropped too (a head
    # not read yet whose last layer has a name a read head uses: DistilBERT's pre_classifier + classifier)
    drops_with: tuple[tuple[str, str], ...] = ()
    in_the_tabs: bool = True        # whether the explorer's tabs read this family (a new family may wait: False)
    # The base model when the family's layers are not BERT's (ModernBERT, DeBERTa): ``(config, add_pooling_layer)``
    # -> a module taking ``BertModel.forward``'s arguments and returning its ``EncoderOutput`` (attention maps from
    # every layer), with ``.config``, ``.pooler`` (None or a module) and ``.embeddings.word_embeddings``.
    # None: the shared ``BertModel``.
    build_base: Callable[[BertConfig, bool], nn.Module] | None = None
    # How far each layer's tokens see: per layer, tokens on each side, or None for every token (ModernBERT's local
    # window); None here: every layer of the family sees every token
    attention_reach: Callable[[BertConfig], tuple[int | None, ...]] | None = None
    # The family's own heads (``HeadSpec``s, ``engine.model.family_heads``): one named as a shared head is the
    # family's variant of it (RoBERTa's sequence classifier reads the first token, no pooler), another name a head
    # only this family has (ELECTRA's replaced-token detection); ``heads.head_specs_for`` makes a model's table.
    heads: tuple[HeadSpec, ...] = ()
    # Key prefixes (transformers' layout) that ``config``'s model does not have though its files may hold them, as
    # transformers' ``_keys_to_ignore_on_load_unexpected``: dropped on reading (DeBERTa's unused position table)
    unused_keys: Callable[[BertConfig], tuple[str, ...]] | None = None

    def architectures_to_ours(self, names: list[str] | None) -> list[str] | None:
        """transformers class names of this family as BERT's (``RobertaForMaskedLM`` -> ``BertForMaskedLM``);
        a class whose head this project does not read for the family is left out."""
        if names is None:
            return None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"config.json's architectures must be a list of class names, got {str(names)[:80]}")
        suffixes = [n[len(self.class_stem):] for n in names if n.startswith(self.class_stem)]
        return [f"Bert{s}" for s in suffixes if s in self.classes]

    def architectures_to_theirs(self, names: list[str] | None) -> list[str] | None:
        """BERT class names as this family's (``BertForMaskedLM`` -> ``RobertaForMaskedLM``)."""
        if names is None:
            return None
        return [self.class_stem + n[len("Bert"):] for n in names if n.startswith("Bert")]

    def state_to_ours(self, state: dict[str, torch.Tensor], architectures: list[str] | None = None
                      ) -> tuple[dict[str, torch.Tensor], list[str]]:
        """A state dict of transformers' layout in the shared one (BERT's names, ``bert.`` prefix for a bare base
        model's keys too), and the keys dropped. BERT's own layouts pass as they are (``key_mapping`` reads them).
        ``architectures`` (config.json's, as BERT's class names) is for a family whose keys depend on the class."""
        if not self.renames.pairs:
            return dict(state), []
        out: dict[str, torch.Tensor] = {}
        dropped: list[str] = []
        bare = not any(k.startswith(self.base_prefix) for k in state)      # ``RobertaModel``: no prefix at all
        also = tuple(second for first, second in self.drops_with if any(k.startswith(first) for k in state))
        for key, value in state.items():
            renamed = None if key.startswith(also) else self.renames.to_ours(self.base_prefix + key if bare else key)
            if renamed is None:
                dropped.append(key)
            else:
                out[renamed] = value
        return out, dropped

    def state_to_theirs(self, state: dict[str, torch.Tensor], bare: bool) -> dict[str, torch.Tensor]:
        """A state dict of the shared layout (as ``key_mapping.export_state`` writes it; ``bare``: a base model
        alone, without the ``bert.`` prefix) in transformers' layout for this family."""
        out: dict[str, torch.Tensor] = {}
        if not self.renames.pairs:
            return dict(state)
        for key, value in state.items():
            renamed = self.renames.to_theirs("bert." + key if bare else key)
            if renamed is None:
                continue
            out[renamed[len(self.base_prefix):] if bare and renamed.startswith(self.base_prefix) else renamed] = value
        return out


def bert_named_config(data: dict[str, Any], family: Family, **fields: Any) -> BertConfig:
    """A ``BertConfig`` from a ``config.json`` whose fields carry BERT's names (RoBERTa, ELECTRA, ALBERT), its
    ``model_type`` kept and ``architectures`` given BERT's class names; ``fields`` set what the family changes."""
    shared = {**data, "model_type": "bert", "architectures": family.architectures_to_ours(data.get("architectures"))}
    return BertConfig.from_dict(shared).replace(model_type=str(data.get("model_type")), **fields)


def bert_named_dict(config: BertConfig, family: Family, **fields: Any) -> dict[str, Any]:
    """``config`` as this family's ``config.json`` (BERT's field names, the family's ``model_type`` and class
    names), with ``fields`` added."""
    data = config.to_dict()
    data["model_type"] = config.model_type
    if config.architectures is not None:
        data["architectures"] = family.architectures_to_theirs(config.architectures)
    return {**data, **fields}
