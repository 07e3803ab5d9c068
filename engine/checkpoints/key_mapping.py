"""Hugging Face BERT state-dict layouts <-> ours.

Our module names equal HF's ``BertFor*`` names (``bert.`` prefix, ``cls.predictions``,
``cls.seq_relationship``, ``qa_outputs``, ``classifier``). Loading accepts every BERT
layout: ``BertModel`` (no prefix), the task classes, DDP's ``module.`` prefix and the
old TF-port ``gamma``/``beta`` LayerNorm names. Saving writes exactly the keys the chosen
``transformers`` class expects, so it loads with nothing missing or unexpected.
"""
from __future__ import annotations

import re

import torch

# architecture -> (heads it carries, whether its encoder has the pooler)
ARCHITECTURES: dict[str, tuple[tuple[str, ...], bool]] = {
    "BertForPreTraining": (("mlm", "nsp"), True),
    "BertForMaskedLM": (("mlm",), False),
    "BertForNextSentencePrediction": (("nsp",), True),
    "BertForQuestionAnswering": (("qa",), False),
    "BertForSequenceClassification": (("classifier",), True),
    "BertModel": ((), True),
}

_HEAD_PREFIXES = {"mlm": "cls.predictions.", "nsp": "cls.seq_relationship.", "qa": "qa_outputs.",
                  "classifier": "classifier."}
_ENCODER_PARTS = ("embeddings.", "encoder.", "pooler.")
# Keys that carry no information of their own: buffers and the tied decoder weight.
_DERIVED = {"bert.embeddings.position_ids", "bert.embeddings.token_type_ids", "cls.predictions.decoder.weight"}


def normalise_keys(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename any HF BERT layout to ours. Returns (state, ignored keys that are not BERT's)."""
    out: dict[str, torch.Tensor] = {}
    ignored: list[str] = []
    for key, value in state.items():
        name = key[len("module."):] if key.startswith("module.") else key
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if name.startswith(_ENCODER_PARTS):
            name = "bert." + name
        if name == "cls.predictions.decoder.bias":
            out.setdefault("cls.predictions.bias", value)  # tied to cls.predictions.bias in HF
            continue
        if name in _DERIVED:
            continue
        if name.startswith("bert.") or any(name.startswith(p) for p in _HEAD_PREFIXES.values()):
            out[name] = value
        else:
            ignored.append(key)
    return out, ignored


def detect_heads(state: dict[str, torch.Tensor]) -> tuple[tuple[str, ...], bool]:
    """Which heads a normalised state dict has, and whether it has the pooler."""
    heads = tuple(h for h, prefix in _HEAD_PREFIXES.items() if any(k.startswith(prefix) for k in state))
    has_pooler = "bert.pooler.dense.weight" in state
    return heads, has_pooler


def architectures_for(heads: tuple[str, ...]) -> list[str]:
    """The ``transformers`` classes a model with these heads is exported as (first = primary)."""
    names: list[str] = []
    if "mlm" in heads and "nsp" in heads:
        names.append("BertForPreTraining")
    elif "mlm" in heads:
        names.append("BertForMaskedLM")
    elif "nsp" in heads:
        names.append("BertForNextSentencePrediction")
    if "qa" in heads:
        names.append("BertForQuestionAnswering")
    if "classifier" in heads:
        names.append("BertForSequenceClassification")
    return names or ["BertModel"]


def export_state(state: dict[str, torch.Tensor], architectures: list[str]) -> dict[str, torch.Tensor]:
    """The keys the given ``transformers`` classes expect together, from our state dict.

    One class gives an exact match (nothing missing or unexpected in ``from_pretrained``).
    ``BertModel`` alone is written without the ``bert.`` prefix, as ``transformers`` does.
    """
    for name in architectures:
        if name not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {name!r}; choose from {', '.join(ARCHITECTURES)}")
    heads = {h for name in architectures for h in ARCHITECTURES[name][0]}
    pooler = any(ARCHITECTURES[name][1] for name in architectures)
    prefixes = [_HEAD_PREFIXES[h] for h in heads]
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key in _DERIVED:
            continue
        if key.startswith("bert.pooler.") and not pooler:
            continue
        if key.startswith("bert.") or any(key.startswith(p) for p in prefixes):
            out[key] = value
    if architectures == ["BertModel"]:
        out = {key[len("bert."):]: value for key, value in out.items()}
    return out
