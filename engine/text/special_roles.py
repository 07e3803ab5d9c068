"""Special tokens by role (cls, sep, mask, pad, unk, bos, eos), as a tokenizer folder's files name them.

A role's token comes from ``tokenizer_config.json``, overridden by ``special_tokens_map.json`` (as
``transformers`` merges them; a value is a string, a ``{"content": ...}`` dict, or null for "none"), else
from the ``tokenizer.json`` post-processor (RobertaProcessing's / BertProcessing's ``cls`` and ``sep``, the
special tokens just before and after ``$A`` in a TemplateProcessing), else BERT's name. A role whose token
is not in the vocabulary is None. Both files are untrusted: a regular file, size-capped, a JSON object.
``layout_template`` reads where a post-processor puts its special tokens around the segments.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from tokenizers import Tokenizer

from engine.regular_files import read_text

ROLES = ("cls", "sep", "mask", "pad", "unk", "bos", "eos")
BERT_TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
CONFIG_FILES = ("tokenizer_config.json", "special_tokens_map.json")   # the later one wins, as in transformers
MAX_CONFIG_BYTES = 16 << 20
_PROBES = ("a", "0", ".", "x")           # texts that give at least one piece in any real vocabulary


def read_json_object(path: Path, limit: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """The JSON object in ``path`` (a regular file of at most ``limit`` bytes); ValueError naming the file."""
    try:
        value = json.loads(read_text(path, limit))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object, not a {type(value).__name__}")
    return value


def read_tokenizer_config(folder: Path) -> dict[str, Any]:
    """``tokenizer_config.json`` updated with ``special_tokens_map.json`` (each only if present in ``folder``)."""
    merged: dict[str, Any] = {}
    for name in CONFIG_FILES:
        path = folder / name
        if path.exists() or path.is_symlink():       # a folder, a pipe or a dangling link is refused, not skipped
            merged.update(read_json_object(path))
    return merged


def configured_tokens(config: Mapping[str, Any], source: str = "tokenizer_config.json") -> dict[str, str | None]:
    """Role -> token for each ``<role>_token`` key in ``config`` (None where the file says null)."""
    found: dict[str, str | None] = {}
    for role in ROLES:
        key = f"{role}_token"
        if key not in config:
            continue
        value = config[key]
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{source}: {key} must be a string or an object with a string 'content'")
        found[role] = value
    return found


def processor_tokens(processor: Mapping[str, Any] | None) -> dict[str, str]:
    """Role -> token that a post-processor's JSON form names (cls and sep at most)."""
    if not isinstance(processor, Mapping):
        return {}
    kind = processor.get("type")
    if kind == "Sequence":
        found: dict[str, str] = {}
        for part in processor.get("processors") or []:
            found = {**processor_tokens(part), **found}
        return found
    if kind in ("RobertaProcessing", "BertProcessing"):
        return {role: str(processor[role][0]) for role in ("cls", "sep") if processor.get(role)}
    if kind != "TemplateProcessing":
        return {}
    specials = processor.get("special_tokens") or {}
    before: list[str] = []
    after: list[str] | None = None       # becomes a list once $A is passed
    for item in processor.get("single") or []:
        if "Sequence" in item:
            after = []
            continue
        tokens = (specials.get(item.get("SpecialToken", {}).get("id")) or {}).get("tokens") or []
        if len(tokens) == 1:
            (before if after is None else after).append(str(tokens[0]))
    return {**({"cls": before[-1]} if before else {}), **({"sep": after[0]} if after else {})}


def resolve_roles(configured: Mapping[str, str | None], processor: Mapping[str, Any] | None,
                  vocab: Mapping[str, int]) -> dict[str, str | None]:
    """Role -> token for every role in ``ROLES``: configured, else the post-processor's, else BERT's name;
    None where that token is not in ``vocab`` (or the configuration names none)."""
    named = processor_tokens(processor)
    roles: dict[str, str | None] = {}
    for role in ROLES:
        token = configured[role] if role in configured else named.get(role, BERT_TOKENS.get(role))
        roles[role] = token if token is not None and token in vocab else None
    return roles


def layout_template(backend: Tokenizer, pair: bool) -> list[tuple[str, str]]:
    """Where the post-processor puts its special tokens, in order: ``("special", token)`` and ``("segment",
    "A" or "B")`` items, e.g. RoBERTa's pair ``<s> A </s> </s> B </s>``; found by encoding a short probe
    (``backend`` must not truncate)."""
    for probe in _PROBES:
        if backend.encode(probe, add_special_tokens=False).ids:
            break
    else:
        return [("segment", "A"), ("segment", "B")] if pair else [("segment", "A")]
    processed = backend.encode(probe, probe) if pair else backend.encode(probe)
    template: list[tuple[str, str]] = []
    for token, sequence in zip(processed.tokens, processed.sequence_ids):
        item = ("special", token) if sequence is None else ("segment", "AB"[sequence])
        if not (item[0] == "segment" and template and template[-1] == item):
            template.append(item)
    return template
