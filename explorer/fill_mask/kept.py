"""Fill-mask's model run, once per input: a *Top-k* change reads the kept guesses instead of running the model.

The forward cache (``explorer/forward_cache.py``, docs/design/forward-cache.md) keeps, per visitor and model
object, each input's top-``KEPT_TOP_K`` guesses (``("fill_mask", text, targets)``: targets choose which tokens
are ranked, so they are part of the key) and its joint fill (``("joint_fill", text)``: it reads only the text).
A smaller *Top-k* is the first k of those, as the engine's ``topk`` returns them, best first; a *Top-k* above the
model's vocabulary goes to the engine, which says so. Plain data, no tensors.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine.checkpoints.hf_format import LoadedModel
from engine.probes import inference
from engine.probes.fill_mask import FillMaskResult, MaskPrediction
from engine.probes.joint_fill import JointFill, joint_fill
from explorer.forward_cache import cached
from explorer.services import Services

KEPT_TOP_K = 50              # guesses kept per mask: the tab's largest Top-k


def kept_top_k(loaded: LoadedModel) -> int:
    """How many guesses per mask are kept for ``loaded``: ``KEPT_TOP_K``, or its vocabulary when smaller."""
    return min(KEPT_TOP_K, int(loaded.config.vocab_size))


def first_guesses(result: FillMaskResult, k: int) -> FillMaskResult:
    """``result`` cut to its first ``k`` guesses per mask (the effective k never grows), as new lists and dicts:
    the kept result is shared by every request that reads it and never changed."""
    def cut(mask: MaskPrediction) -> MaskPrediction:
        return dataclasses.replace(mask, token_ids=mask.token_ids[:k], tokens=mask.tokens[:k],
                                   token_strs=mask.token_strs[:k], scores=mask.scores[:k],
                                   sequences=mask.sequences[:k],
                                   target_probabilities=dict(mask.target_probabilities), tracked=dict(mask.tracked))

    return dataclasses.replace(result, top_k=min(k, result.top_k), masks=[cut(m) for m in result.masks],
                               warnings=list(result.warnings))


def fill_details(services: Services, loaded: LoadedModel, text: str, top_k: int,
                 targets: Sequence[str] | None) -> FillMaskResult:
    """``inference.fill_mask_details(loaded, text, top_k, targets)``, the model run once per (text, targets)."""
    kept = kept_top_k(loaded)
    if top_k > kept:                                  # more than the vocabulary: the engine warns and clamps
        return inference.fill_mask_details(loaded, text, top_k, targets)
    words = tuple(targets) if targets else None
    result = cached(services.forward_cache, loaded.model, ("fill_mask", text, words),
                    lambda: inference.fill_mask_details(loaded, text, kept, list(words) if words else None))
    return first_guesses(result, top_k)


def joint_details(services: Services, loaded: LoadedModel, text: str) -> JointFill:
    """``joint_fill(loaded, text)`` (one forward per mask), run once per text."""
    return cached(services.forward_cache, loaded.model, ("joint_fill", text), lambda: joint_fill(loaded, text))
