"""Inputs for the task-head probes (classify, tag, choose, next sentence): checked encodings and tensors.

Each probe reads one text or text pair. Unlike the pipelines, which truncate silently (or fail
inside the model), an input longer than the model's positions is refused with a sentence that
says how long it is and how long it may be.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.model.loaded_model import LoadedModel
from engine.text.encoding import Encoding
from engine.text.segment_ids import uses_segment_ids


def check_text(value: object, name: str, example: str) -> str:
    """``value`` if it is a non-blank str, else a ``TypeError``/``ValueError`` naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} is empty: {example}")
    return value


def encode_pairs(loaded: LoadedModel, pairs: Sequence[tuple[str, str | None]],
                 names: Sequence[str] | None = None) -> list[Encoding]:
    """Encode each (text, text_pair or None) as ``[CLS] A [SEP] (B [SEP])``, unpadded, untruncated.

    Raises ``ValueError`` when the model has no tokenizer or an input is longer than its positions
    (named ``names[i]``, default "the input").
    """
    tokenizer = loaded.require_tokenizer()
    limit = loaded.config.max_tokens
    encodings = [tokenizer.encode(text, pair or None, max_length=limit, truncation=False) for text, pair in pairs]
    for i, encoding in enumerate(encodings):
        if len(encoding.input_ids) > limit:
            name = names[i] if names is not None else "the input"
            raise ValueError(f"{name} is {len(encoding.input_ids)} tokens long but this model reads at most "
                             f"{limit} (special tokens included); shorten the text")
    return encodings


def batch_tensors(loaded: LoadedModel, encodings: Sequence[Encoding]) -> dict[str, torch.Tensor]:
    """``input_ids``, ``attention_mask`` and ``token_type_ids`` (N, S) on the model's device, padded on the
    right with the tokenizer's [PAD] to the longest encoding (as ``padding=True`` does)."""
    device = next(loaded.model.parameters()).device
    length = max(len(e.input_ids) for e in encodings)
    pad = loaded.tokenizer.pad_token_id
    ids = [e.input_ids + [pad] * (length - len(e.input_ids)) for e in encodings]
    mask = [[1] * len(e.input_ids) + [0] * (length - len(e.input_ids)) for e in encodings]
    types = [e.token_type_ids + [0] * (length - len(e.input_ids)) for e in encodings]
    if not uses_segment_ids(loaded.config, loaded.tokenizer):
        types = [[0] * length for _ in encodings]     # a model that takes no segment ids reads a pair as one segment
    return {"input_ids": torch.tensor(ids, device=device),             # (N, S)
            "attention_mask": torch.tensor(mask, device=device),       # (N, S)
            "token_type_ids": torch.tensor(types, device=device)}      # (N, S)
