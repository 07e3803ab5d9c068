"""Rotary position embeddings (Su et al., 2021) as ModernBERT uses them: each pair of a head's dimensions (i, i + hd/2)
is rotated by the angle ``position * theta ** (-2i / hd)``, for queries and keys alike, so their dot product depends
on the distance between two positions. Computed in float32 as transformers does, from the positions alone (no
tables: nothing to load, nothing left on the ``meta`` device)."""
from __future__ import annotations

import torch


def rotary_angles(position_ids: torch.Tensor, head_size: int, theta: float,
                  dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (B, S, hd) in ``dtype``, for ``position_ids`` (B, S) (or (1, S)) and base ``theta``."""
    inverse = 1.0 / (theta ** (torch.arange(0, head_size, 2, dtype=torch.float32,
                                            device=position_ids.device) / head_size))     # (hd/2,)
    angles = position_ids[..., None].float() * inverse                                     # (B, S, hd/2)
    both = torch.cat((angles, angles), dim=-1)                                             # (B, S, hd)
    return both.cos().to(dtype), both.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the last dimension's two halves."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Queries or keys (B, nh, S, hd) rotated by (cos, sin) (B, S, hd), in float32, returned in ``x``'s dtype."""
    cos, sin = cos[:, None], sin[:, None]                                                  # (B, 1, S, hd)
    wide = x.float()
    return (wide * cos + _rotate_half(wide) * sin).to(x.dtype)
