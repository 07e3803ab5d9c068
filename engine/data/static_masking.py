"""Static MLM masking: each token of the corpus is masked one way, whenever and in whatever instance it is seen.

RoBERTa's static masking (Liu et al. 2019, section 4.1) masks the data once, when it is prepared, so a sequence
meets the same mask every epoch; dynamic masking (``engine.data.masking``, the default) draws anew at every
collation. Our instances are planned again each epoch (a new split point, NotNext partner and short target:
``engine.data.instance_plan``), so a mask seeded by the instance would rarely meet the same instance twice; the
draw is seeded by the corpus instead: every decision about a token (chosen? mask, random or kept? which random
token?) is a hash of the dataset's seed and the token's offset in the ``TokenStore``, as if the corpus had been
masked once and kept. An instance seen in two epochs gets the same masked positions, and so does any other
instance holding those tokens. Whole-word masking decides a word by the offset of its first piece in the row.

The shares follow the same settings as dynamic masking (``mlm_probability``, ``mask_mix``); the draws are other
numbers than the dynamic ones, so a static run is its own run.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from engine.data.packing import is_packed, packed_offsets
from engine.data.masking import (
    DEFAULT_MASK_MIX, MaskResult, allowed_random_ids, apply_mask, check_mask_mix, random_share_of_rest,
)

# the hash's streams: one per decision about a token
_CHOOSE, _MASK, _RANDOM, _PICK = 1, 2, 3, 4
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that spreads every input bit over the output."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hashed_uniform(seed: int, keys: np.ndarray, stream: int) -> np.ndarray:
    """A uniform number in [0, 1) per key (any int64 array), fixed by (``seed``, key, ``stream``): float64."""
    with np.errstate(over="ignore"):
        base = _mix64(np.asarray([seed & (2**64 - 1)], dtype=np.uint64) + np.uint64(stream) * _GOLDEN)
        z = _mix64((np.asarray(keys, dtype=np.int64).view(np.uint64) + np.uint64(1)) * _GOLDEN + base)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def token_offsets(rows: np.ndarray, width: int) -> torch.Tensor:
    """(B, S) each position's offset in the store (-1 at the specials and padding) for the collated layout
    ``cls A sep B sep`` of plan rows (n, 5): ``(a_start, a_end, b_start, b_end, is_random_next)``, or of packed rows
    (``engine.data.packing``)."""
    if is_packed(np.asarray(rows)):
        return packed_offsets(rows, width)
    offsets = torch.full((len(rows), width), -1, dtype=torch.long)                    # (B, S)
    for r, (a0, a1, b0, b1, _) in enumerate(np.asarray(rows, dtype=np.int64).tolist()):
        offsets[r, 1:1 + a1 - a0] = torch.arange(a0, a1)
        if b1 > b0:
            start = 2 + a1 - a0
            offsets[r, start:start + b1 - b0] = torch.arange(b0, b1)
    return offsets


def static_mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    offsets: torch.Tensor,
    seed: int,
    vocab_size: int,
    mask_token_id: int,
    mlm_probability: float = 0.15,
    whole_word_ids: torch.Tensor | None = None,
    random_token_ids: torch.Tensor | Sequence[int] | None = None,
    mask_mix: Sequence[float] = DEFAULT_MASK_MIX,
) -> MaskResult:
    """``mask_tokens_detailed``'s result with every decision a hash of (``seed``, the token's store offset).

    ``offsets`` (B, S): each position's offset in the corpus (``token_offsets``); a position that may be chosen
    must have one. With ``whole_word_ids`` a word is chosen by its first piece's offset, and all its pieces with it.
    The same token at the same offset gets the same decisions in every batch (for one ``seed``).
    """
    if not input_ids.shape == special_tokens_mask.shape == offsets.shape or input_ids.dim() != 2:
        raise ValueError(f"input_ids, special_tokens_mask and offsets must all be (B, S); got "
                         f"{tuple(input_ids.shape)}, {tuple(special_tokens_mask.shape)} and {tuple(offsets.shape)}")
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
    mix = check_mask_mix(mask_mix)
    special = special_tokens_mask.cpu().bool()                                          # (B, S)
    where = offsets.cpu().long().numpy()                                                # (B, S)
    if (where[~special.numpy()] < 0).any():
        raise ValueError("static masking needs the corpus offset of every position that may be chosen")
    if whole_word_ids is None:
        choose_keys = where
    else:
        words = whole_word_ids.cpu().long()                                             # (B, S)
        if words.shape != special.shape:
            raise ValueError(f"whole_word_ids must be {tuple(special.shape)}, got {tuple(words.shape)}")
        choose_keys = _first_piece_offsets(words, where)                                # (B, S)
    chosen = torch.from_numpy(hashed_uniform(seed, choose_keys, _CHOOSE) < mlm_probability) & ~special
    if whole_word_ids is not None:
        chosen &= whole_word_ids.cpu() >= 0
    to_mask = torch.from_numpy(hashed_uniform(seed, where, _MASK) < mix[0]) & chosen
    to_random = torch.from_numpy(hashed_uniform(seed, where, _RANDOM) < random_share_of_rest(mix)) & chosen & ~to_mask
    allowed = allowed_random_ids(input_ids.cpu(), special, vocab_size, mask_token_id, random_token_ids).cpu()  # (R,)
    picks = torch.from_numpy((hashed_uniform(seed, where, _PICK) * len(allowed)).astype(np.int64))     # (B, S)
    random_words = allowed[picks.clamp(max=len(allowed) - 1)]                           # (B, S)
    result = apply_mask(input_ids.cpu(), chosen, to_mask, to_random, random_words, mask_token_id)
    device = input_ids.device
    return MaskResult(result.input_ids.to(device), result.labels.to(device), result.mask_kind.to(device))


def _first_piece_offsets(words: torch.Tensor, offsets: np.ndarray) -> np.ndarray:
    """(B, S) the store offset of the first piece of each position's word (its own offset where it has none)."""
    rows, width = words.shape
    positions = torch.arange(width).expand(rows, width)                                 # (B, S)
    in_word = words >= 0
    index = words.clamp(min=0)                                                          # (B, S)
    first = torch.full((rows, int(index.max().item()) + 1 if words.numel() else 1), width)  # (B, W)
    first.scatter_reduce_(1, index, torch.where(in_word, positions, width), reduce="amin")  # each word's first
    lead = torch.where(in_word, first.gather(1, index), positions)                      # (B, S)
    return np.take_along_axis(offsets, lead.numpy(), axis=1)
