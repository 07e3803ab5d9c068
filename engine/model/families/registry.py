"""Every family by ``model_type`` (``FAMILIES``), and the few calls the loaders make through it: a ``config.json``
read into a ``BertConfig`` of its family (``config_from_dict``, ``load_config``), written back
(``config_to_dict``), and a state dict renamed between a family's layout and the shared one
(``state_to_ours``, ``state_to_theirs``). Adding a family: its module, and one line in ``_ALL``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from engine.model.config import BertConfig, read_config_json
from engine.model.families.albert import ALBERT
from engine.model.families.bert import BERT
from engine.model.families.deberta import DEBERTA
from engine.model.families.distilbert import DISTILBERT
from engine.model.families.electra import ELECTRA
from engine.model.families.family import Family
from engine.model.families.modernbert import MODERNBERT
from engine.model.families.roberta import ROBERTA, XLM_R

_ALL = (BERT, ROBERTA, XLM_R, DISTILBERT, ELECTRA, ALBERT, DEBERTA, MODERNBERT)
FAMILIES: dict[str, Family] = {model_type: family for family in _ALL for model_type in family.model_types}


def family_of(model_type: str | None) -> Family:
    """The family of a ``config.json``'s ``model_type`` (absent: BERT); a ``ValueError`` naming those read."""
    family = FAMILIES.get(model_type or "bert")
    if family is None:
        known = ", ".join(f"{f.name} ('{t}')" for f in _ALL for t in f.model_types)
        raise ValueError(f"config.json has model_type {str(model_type)[:60]!r}, a family this app does not read; "
                         f"it reads {known}")
    return family


def config_from_dict(data: dict[str, Any]) -> BertConfig:
    """A ``config.json`` dict of any family read into a validated ``BertConfig`` (its ``model_type`` kept)."""
    if not isinstance(data, dict):
        raise ValueError("config.json must hold a JSON object")
    model_type = data.get("model_type", "bert")
    return family_of(model_type if isinstance(model_type, str) else repr(model_type)).config_from_hf(data)


def config_to_dict(config: BertConfig) -> dict[str, Any]:
    """``config`` as its family's ``config.json`` (what ``transformers`` reads for that family)."""
    return family_of(config.model_type).config_to_hf(config)


def save_config(config: BertConfig, directory: str | Path) -> Path:
    """Write ``config.json`` of ``config``'s family into ``directory``; its path."""
    path = Path(directory) / "config.json"
    path.write_text(json.dumps(config_to_dict(config), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_config(path: str | Path) -> BertConfig:
    """Read a ``config.json`` (or the one inside a directory) of any family: a regular file, size-capped."""
    return config_from_dict(read_config_json(path))


def state_to_ours(state: dict[str, torch.Tensor], config: BertConfig) -> tuple[dict[str, torch.Tensor], list[str]]:
    """A checkpoint's state dict of ``config``'s family in the shared layout, and the keys dropped."""
    family = family_of(config.model_type)
    unused = family.unused_keys(config) if family.unused_keys is not None else ()
    kept = {k: v for k, v in state.items() if not k.startswith(unused)} if unused else state
    ours, dropped = family.state_to_ours(kept, config.architectures)
    return ours, [k for k in state if k not in kept] + dropped


def state_to_theirs(state: dict[str, torch.Tensor], config: BertConfig, bare: bool) -> dict[str, torch.Tensor]:
    """The shared layout (``key_mapping.export_state``'s) in ``config``'s family's layout."""
    return family_of(config.model_type).state_to_theirs(state, bare)


def check_in_the_tabs(config: BertConfig, name: str) -> None:
    """A ``ValueError`` sentence when the explorer's tabs do not read ``config``'s family yet (``name``: the model)."""
    family = family_of(config.model_type)
    if not family.in_the_tabs:
        readable = ", ".join(dict.fromkeys(f.name for f in FAMILIES.values() if f.in_the_tabs))
        raise ValueError(f"{name} is a {family.name} model: it loads in the engine (engine.load, as transformers "
                         f"computes it), but the tabs do not read this family yet; they read {readable} models "
                         "(docs/design/families.md).")


def attention_reach(config: BertConfig) -> tuple[int | None, ...]:
    """Per layer, how many tokens on each side a token attends to, or None for every token (ModernBERT's local
    layers see a window; every other family's layers, everything)."""
    reach = family_of(config.model_type).attention_reach
    return reach(config) if reach is not None else (None,) * config.num_hidden_layers
