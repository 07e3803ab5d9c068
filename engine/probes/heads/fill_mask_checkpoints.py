"""One fill-mask sentence over a run's checkpoints: each checkpoint's predictions, and every token's line.

`fill_mask_over_checkpoints` runs ``fill_mask`` on each checkpoint in turn (one model in memory at a time) and
gives each mask a ``tracked`` dict: every token in the top-k of *any* checkpoint at that mask, with its
probability in this one, so a chart can draw one line per token over training. `checkpoint_step` reads the
training step from a checkpoint's name (``"step-000200"`` -> 200).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import torch

from engine import cancellation
from engine.checkpoints.hf_format import load
from engine.model.loaded_model import LoadedModel
from engine.probes.heads.fill_mask import FillMaskResult, fill_mask_with_probabilities

_STEP = re.compile(r"(?:step|checkpoint)[-_]?(\d+)$", re.IGNORECASE)


def fill_mask_over_checkpoints(sources: Sequence[str | Path | LoadedModel], text: str, top_k: int = 5,
                               targets: str | Sequence[str] | None = None,
                               text_pair: str | None = None) -> list[tuple[str, FillMaskResult]]:
    """Probe one sentence across checkpoints: ``[(label, result), ...]`` in the order given.

    A label is the checkpoint's directory name (e.g. ``"step-000200"``; see
    :func:`checkpoint_step`). Each mask's ``tracked`` dict then holds, for every token
    that is in the top-k of *any* checkpoint at that mask, its probability in this
    checkpoint, so a chart can draw one line per token over training.
    """
    if not sources:
        raise ValueError("no checkpoints given to probe")
    runs: list[tuple[str, FillMaskResult, torch.Tensor, Any]] = []
    for source in sources:
        cancellation.check()                                              # between checkpoints
        loaded = source if isinstance(source, LoadedModel) else load(source)
        result, probs = fill_mask_with_probabilities(loaded, text, top_k, text_pair, targets)   # probs: (M, V)
        runs.append((_label(source), result, probs, loaded.tokenizer))
        del loaded                                                        # keep one model in memory at a time
    union: dict[int, dict[str, None]] = {}                                # mask index -> pieces, first seen first
    for _, result, _, _ in runs:
        for mask in result.masks:
            union.setdefault(mask.index, {}).update(dict.fromkeys(t for t in mask.tokens if t))
    for _, result, probs, tokenizer in runs:
        for mask in result.masks:
            ids = {piece: tokenizer.token_to_id(piece) for piece in union[mask.index]}
            mask.tracked = {tokenizer.display_piece(piece): float(probs[mask.index, i])
                            if i is not None and i < probs.shape[1] else 0.0 for piece, i in ids.items()}
    return [(label, result) for label, result, _, _ in runs]


def checkpoint_step(label: str) -> int | None:
    """The training step in a checkpoint name like ``"step-000200"`` or ``"checkpoint-50"``, else None."""
    found = _STEP.search(str(label))
    return int(found.group(1)) if found else None


def _label(source: str | Path | LoadedModel) -> str:
    """A checkpoint's label: its directory's name (``"default"`` for the bundled model)."""
    if isinstance(source, LoadedModel):
        return source.path.name if source.path is not None else source.source
    if str(source) == "default":
        return "default"
    return Path(str(source)).expanduser().name or str(source)
