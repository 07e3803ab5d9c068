"""Per-head statistics of attention maps: what each head mostly looks at.

Computed in torch, one layer at a time (no float64 copy of the maps), over softmax probabilities
``(L, nh, S, S)`` (row ``i`` = where query token ``i`` looks). Every statistic is a mean over query
tokens, so it lies in ``[0, 1]`` (entropy and distance excepted):

* ``entropy``   -sum_j p_ij log p_ij in nats (0 = looks at one token, log S = uniform);
* ``cls``       attention mass on ``[CLS]`` positions;
* ``sep``       attention mass on ``[SEP]`` positions;
* ``self``      p_ii;
* ``prev``      p_i,i-1 over queries that have a previous token;
* ``next``      p_i,i+1 over queries that have a next token;
* ``distance``  sum_j p_ij |i - j|, in tokens.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

STAT_NAMES: tuple[str, ...] = ("entropy", "cls", "sep", "self", "prev", "next", "distance")
STAT_TITLES: dict[str, str] = {
    "entropy": "entropy (nats)",
    "cls": "share to [CLS]",
    "sep": "share to [SEP]",
    "self": "share to self",
    "prev": "share to previous token",
    "next": "share to next token",
    "distance": "mean distance |i-j| (tokens)",
}


@dataclass
class HeadStats:
    """One (L, nh) float array per statistic (see the module docstring)."""

    entropy: np.ndarray
    cls: np.ndarray
    sep: np.ndarray
    self: np.ndarray
    prev: np.ndarray
    next: np.ndarray
    distance: np.ndarray

    def get(self, name: str) -> np.ndarray:
        """The (L, nh) array of statistic ``name`` (one of ``STAT_NAMES``)."""
        if name not in STAT_NAMES:
            raise ValueError(f"unknown head statistic {name!r}; choose from {', '.join(STAT_NAMES)}")
        return getattr(self, name)

    def as_dict(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def head(self, layer: int, head: int) -> dict[str, float]:
        """The statistics of one head as plain floats."""
        return {name: float(self.get(name)[layer, head]) for name in STAT_NAMES}

    def records(self) -> list[dict[str, Any]]:
        """A pandas-friendly table: one dict per head, ``layer``, ``head`` then every statistic."""
        layers, heads = self.entropy.shape
        return [{"layer": layer, "head": head, **self.head(layer, head)}
                for layer in range(layers) for head in range(heads)]


def layer_statistics(probs: torch.Tensor, cls_positions: Sequence[int] = (0,),
                     sep_positions: Sequence[int] = ()) -> dict[str, torch.Tensor]:
    """Every statistic of one layer's heads from its probabilities ``(nh, S, S)`` (S >= 1), each ``(nh,)``,
    in the tensor's own floating dtype (float32 for float16 input): no copy of the maps is larger than one
    layer's."""
    probs = probs if probs.dtype in (torch.float32, torch.float64) else probs.float()       # (nh, S, S)
    seq_len = probs.shape[-1]
    zeros = probs.new_zeros(probs.shape[0])                                     # (nh,)
    entropy = (-torch.special.xlogy(probs, probs).sum(-1).mean(-1)).clamp_min(0.0)  # 0 log 0 = 0; no -0.0
    index = torch.arange(seq_len, device=probs.device)
    gaps = (index[:, None] - index[None, :]).abs().to(probs.dtype)             # (S, S)
    return {
        "entropy": entropy,
        "cls": probs[..., list(cls_positions)].sum(-1).mean(-1) if len(cls_positions) else zeros,
        "sep": probs[..., list(sep_positions)].sum(-1).mean(-1) if len(sep_positions) else zeros,
        "self": torch.diagonal(probs, dim1=-2, dim2=-1).mean(-1),               # (nh, S) -> (nh,)
        "prev": torch.diagonal(probs, offset=-1, dim1=-2, dim2=-1).mean(-1) if seq_len > 1 else zeros,  # p[i, i-1]
        "next": torch.diagonal(probs, offset=1, dim1=-2, dim2=-1).mean(-1) if seq_len > 1 else zeros,   # p[i, i+1]
        "distance": (probs * gaps).sum(-1).mean(-1),                           # (nh,)
    }


def check_positions(seq_len: int, cls_positions: Sequence[int], sep_positions: Sequence[int]) -> None:
    """A ``ValueError`` when a [CLS] or [SEP] position lies outside ``seq_len`` tokens."""
    for name, positions in (("[CLS]", cls_positions), ("[SEP]", sep_positions)):
        bad = [p for p in positions if not 0 <= p < seq_len]
        if bad:
            raise ValueError(f"{name} positions {bad} are outside the sequence of {seq_len} tokens")


def head_statistics(attentions: np.ndarray, cls_positions: Sequence[int] = (0,),
                    sep_positions: Sequence[int] = ()) -> HeadStats:
    """Statistics of every head from probabilities ``(L, nh, S, S)`` (or ``(nh, S, S)``, as L = 1), computed
    one layer at a time in torch (float32 for float16/float32 maps: no float64 copy of the maps)."""
    probs = np.asarray(attentions)
    if probs.ndim == 3:
        probs = probs[None]                                                     # (1, nh, S, S)
    if probs.ndim != 4 or probs.shape[-1] != probs.shape[-2]:
        raise ValueError(f"attentions must have shape (L, nh, S, S), got {probs.shape}")
    seq_len = probs.shape[-1]
    check_positions(seq_len, cls_positions, sep_positions)
    found = {name: np.zeros(probs.shape[:2]) for name in STAT_NAMES}           # name -> (L, nh)
    if seq_len == 0:
        return HeadStats(**found)
    dtype = torch.float64 if probs.dtype == np.float64 else torch.float32
    for layer in range(probs.shape[0]):
        maps = torch.as_tensor(np.ascontiguousarray(probs[layer]), dtype=dtype)  # (nh, S, S), one layer
        for name, values in layer_statistics(maps, cls_positions, sep_positions).items():
            found[name][layer] = values.cpu().numpy()
    return HeadStats(**found)
