"""Fill-mask's model run, once per input: a *Top-k* or *targets* change reads the kept logits.

The forward cache (``explorer/forward_cache.py``, docs/design/forward-cache.md) keeps, per visitor and model
object, each text's MLM logits at its masks (``("fill_logits", text)``: ``(masks, vocabulary)`` float32, what
``engine.probes.heads.fill_mask.fill_mask_logits`` returns, 122 KB a mask for a 30,522-piece vocabulary) and its joint
fill (``("joint_fill", text)``). Any *Top-k* and any *targets* are then ranked from those logits by the engine's
``fill_mask_from_logits`` (no model run), which gives exactly what ``fill_mask_details`` gives, warnings
included. No tensor math here: the logits are the engine's array, kept and handed back.
"""
from __future__ import annotations

from collections.abc import Sequence

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.fill_mask import FillMaskResult, fill_mask_from_logits, fill_mask_logits
from engine.probes.heads.joint_fill import JointFill, joint_fill
from explorer.forward_cache import cached
from explorer.services import Services

MAX_TOP_K = 50               # the tab's largest Top-k


def fill_details(services: Services, loaded: LoadedModel, text: str, top_k: int,
                 targets: Sequence[str] | None) -> FillMaskResult:
    """``inference.fill_mask_details(loaded, text, top_k, targets)``, the model run once per text."""
    logits = cached(services.forward_cache, loaded.model, ("fill_logits", text),
                    lambda: fill_mask_logits(loaded, text))
    return fill_mask_from_logits(loaded, text, logits, top_k, list(targets) if targets else None)


def joint_details(services: Services, loaded: LoadedModel, text: str) -> JointFill:
    """``joint_fill(loaded, text)`` (one forward per mask), run once per text."""
    return cached(services.forward_cache, loaded.model, ("joint_fill", text), lambda: joint_fill(loaded, text))
