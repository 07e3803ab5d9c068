"""Per-head statistics of attention maps: what each head mostly looks at.

Pure numpy over softmax probabilities ``(L, nh, S, S)`` (row ``i`` = where query token ``i``
looks). Every statistic is a mean over query tokens, so it lies in ``[0, 1]`` (entropy and
distance excepted):

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


def head_statistics(attentions: np.ndarray, cls_positions: Sequence[int] = (0,),
                    sep_positions: Sequence[int] = ()) -> HeadStats:
    """Statistics of every head from probabilities ``(L, nh, S, S)`` (or ``(nh, S, S)``, as L = 1)."""
    probs = np.asarray(attentions, dtype=np.float64)
    if probs.ndim == 3:
        probs = probs[None]                                                     # (1, nh, S, S)
    if probs.ndim != 4 or probs.shape[-1] != probs.shape[-2]:
        raise ValueError(f"attentions must have shape (L, nh, S, S), got {probs.shape}")
    seq_len = probs.shape[-1]
    for name, positions in (("[CLS]", cls_positions), ("[SEP]", sep_positions)):
        bad = [p for p in positions if not 0 <= p < seq_len]
        if bad:
            raise ValueError(f"{name} positions {bad} are outside the sequence of {seq_len} tokens")
    if seq_len == 0:
        zeros = np.zeros(probs.shape[:2])
        return HeadStats(*(zeros.copy() for _ in STAT_NAMES))
    logs = np.log(np.where(probs > 0, probs, 1.0))                              # 0 log 0 = 0
    entropy = np.maximum(-(probs * logs).sum(-1).mean(-1), 0.0)                  # (L, nh); no -0.0
    cls = probs[..., list(cls_positions)].sum(-1).mean(-1) if len(cls_positions) else np.zeros(probs.shape[:2])
    sep = probs[..., list(sep_positions)].sum(-1).mean(-1) if len(sep_positions) else np.zeros(probs.shape[:2])
    diagonal = np.diagonal(probs, axis1=-2, axis2=-1)                           # (L, nh, S)
    below = np.diagonal(probs, offset=-1, axis1=-2, axis2=-1)                   # (L, nh, S-1): p[i, i-1]
    above = np.diagonal(probs, offset=1, axis1=-2, axis2=-1)                    # (L, nh, S-1): p[i, i+1]
    index = np.arange(seq_len)
    gaps = np.abs(index[:, None] - index[None, :])                              # (S, S)
    distance = (probs * gaps).sum(-1).mean(-1)                                  # (L, nh)
    zeros = np.zeros(probs.shape[:2])
    return HeadStats(
        entropy=entropy, cls=cls, sep=sep, self=diagonal.mean(-1),
        prev=below.mean(-1) if seq_len > 1 else zeros, next=above.mean(-1) if seq_len > 1 else zeros.copy(),
        distance=distance,
    )
