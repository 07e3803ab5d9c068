"""Dynamic MLM masking: choose positions, then 80% the mask token / 10% random / 10% unchanged.

Masking follows ``transformers.DataCollatorForLanguageModeling.torch_mask_tokens`` and
is redone every time a batch is collated (dynamic masking, as RoBERTa): each eligible
position is chosen with probability ``mlm_probability``; of the chosen, 80% become the
tokenizer's mask token (BERT's [MASK], RoBERTa's <mask>), 10% a random non-special token, 10% stay;
labels hold the original id at chosen positions and -100 elsewhere. The shares are a setting, the
mask mix (``mask_mix``: mask / random / keep, BERT's Table 8; ``check_mask_mix``); at its default,
(0.8, 0.1, 0.1), the draws are exactly those of the fixed 80/10/10. Whole-word masking chooses words
instead of pieces, the words as the vocabulary's kind marks them (``whole_word_ids_from``). Static masking
(the same mask every time a text is seen) is ``engine.data.static_masking``'s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

IGNORE_INDEX = -100
# Per-position "how was it masked" categories (Batch.mask_kind), for the 80/10/10 view.
KIND_NONE, KIND_MASK, KIND_RANDOM, KIND_KEPT = 0, 1, 2, 3
KIND_NAMES = ("none", "[MASK]", "random", "kept")
MASK_REPLACE_PROB = 0.8
RANDOM_REPLACE_PROB = 0.1
KEEP_PROB = 0.1
# Of the chosen positions: the shares replaced by the mask token, by a random token, and kept (BERT's 80/10/10)
DEFAULT_MASK_MIX: tuple[float, float, float] = (MASK_REPLACE_PROB, RANDOM_REPLACE_PROB, KEEP_PROB)
_MIX_TOLERANCE = 1e-6


def check_mask_mix(mix: Sequence[float], name: str = "mask_mix") -> tuple[float, float, float]:
    """``mix`` as three floats (mask token, random token, kept), each in [0, 1] and adding up to 1; ``ValueError``
    starting with ``name`` otherwise."""
    try:
        shares = tuple(float(x) for x in mix)
    except (TypeError, ValueError):
        shares = ()
    if len(shares) != 3 or isinstance(mix, (str, bytes)) or any(isinstance(x, bool) for x in mix):
        raise ValueError(f"{name} must be three shares of the chosen positions (mask token, random token, kept), "
                         f"such as 0.8,0.1,0.1; got {mix!r}")
    if not all(0.0 <= x <= 1.0 for x in shares):          # NaN fails too
        raise ValueError(f"{name} shares must each be between 0 and 1, got {','.join(f'{x:g}' for x in shares)}")
    if abs(sum(shares) - 1.0) > _MIX_TOLERANCE:
        raise ValueError(f"{name} shares must add up to 1 (mask token + random token + kept), got "
                         f"{','.join(f'{x:g}' for x in shares)}, which add up to {sum(shares):g}")
    return shares                                                        # type: ignore[return-value]


def random_share_of_rest(mix: Sequence[float]) -> float:
    """The probability that a chosen position not given the mask token gets a random one: random / (1 - mask),
    0 when everything is masked (the default's 0.1 / 0.2 computed as it always was)."""
    mask, random_share = mix[0], mix[1]
    if mask >= 1.0:
        return 0.0
    return min(1.0, max(0.0, random_share / (1.0 - mask)))


@dataclass
class MaskResult:
    """Output of ``mask_tokens_detailed``; all (B, S)."""

    input_ids: torch.Tensor    # masked copy of the input
    labels: torch.Tensor       # original id where chosen, -100 elsewhere
    mask_kind: torch.Tensor    # KIND_NONE / KIND_MASK / KIND_RANDOM / KIND_KEPT


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    vocab_size: int,
    mask_token_id: int,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    whole_word_ids: torch.Tensor | None = None,
    random_token_ids: torch.Tensor | Sequence[int] | None = None,
    mask_mix: Sequence[float] = DEFAULT_MASK_MIX,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's MLM corruption: ``(masked_ids, labels)``, both (B, S) long; the input is not modified.

    Same contract as ``transformers``' ``DataCollatorForLanguageModeling.torch_mask_tokens``.
    ``special_tokens_mask`` (B, S) is 1 where a position may never be chosen: [CLS], [SEP]
    *and padding*. See ``mask_tokens_detailed`` for the arguments and the per-position kinds.
    """
    result = mask_tokens_detailed(input_ids, special_tokens_mask, vocab_size, mask_token_id, mlm_probability,
                                  generator, whole_word_ids, random_token_ids, mask_mix)
    return result.input_ids, result.labels


def mask_tokens_detailed(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    vocab_size: int,
    mask_token_id: int,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    whole_word_ids: torch.Tensor | None = None,
    random_token_ids: torch.Tensor | Sequence[int] | None = None,
    mask_mix: Sequence[float] = DEFAULT_MASK_MIX,
) -> MaskResult:
    """Choose, replace and label positions; also say how each was replaced (``mask_kind``).

    - Each position with ``special_tokens_mask == 0`` is chosen with probability
      ``mlm_probability`` (Bernoulli, as ``transformers``), so the expected rate is exact.
    - ``whole_word_ids`` (B, S): a word index per position (negative = no word), whatever the
      vocabulary's kind marks as words (``whole_word_ids_from``). A word is
      chosen with probability ``mlm_probability`` and then all its pieces are; the expected
      fraction of chosen tokens is still ``mlm_probability``. Word indices must be unique
      within a row (segment B's words numbered after A's); see ``whole_word_ids_from``.
    - Of the chosen: 80% -> ``mask_token_id``, 10% -> an id drawn uniformly from
      ``random_token_ids`` (default: every id below ``vocab_size`` except ``mask_token_id``
      and the ids found at special positions of this batch — pass ``VocabSpec.random_token_ids``
      to exclude [UNK] too), 10% unchanged; decided per token. ``mask_mix`` sets those three shares
      (``check_mask_mix``); the mask token is drawn first, then random among the rest, as transformers does.
    - Random draws use ``generator`` (on its device; results are moved to the input's).
    """
    if input_ids.dim() != 2 or input_ids.shape != special_tokens_mask.shape:
        raise ValueError(f"input_ids and special_tokens_mask must both be (B, S); got "
                         f"{tuple(input_ids.shape)} and {tuple(special_tokens_mask.shape)}")
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
    mix = check_mask_mix(mask_mix)
    device = input_ids.device
    draw_device = generator.device if generator is not None else device
    shape = input_ids.shape                                                # (B, S)
    special = special_tokens_mask.to(device=draw_device, dtype=torch.bool)  # (B, S)

    if whole_word_ids is None:
        probs = torch.full(shape, float(mlm_probability), device=draw_device).masked_fill_(special, 0.0)
        chosen = torch.bernoulli(probs, generator=generator).bool()       # (B, S)
    else:
        words = whole_word_ids.to(device=draw_device, dtype=torch.long)    # (B, S)
        if words.shape != shape:
            raise ValueError(f"whole_word_ids must be {tuple(shape)}, got {tuple(words.shape)}")
        num_words = int(words.max().item()) + 1 if words.numel() else 0
        word_chosen = torch.rand((shape[0], max(num_words, 1)), generator=generator,
                                 device=draw_device) < mlm_probability     # (B, W)
        chosen = word_chosen.gather(1, words.clamp(min=0)) & (words >= 0) & ~special  # (B, S)

    to_mask = torch.bernoulli(torch.full(shape, mix[0], device=draw_device),
                              generator=generator).bool() & chosen
    random_share = random_share_of_rest(mix)                               # the default's 0.5 of the rest
    to_random = torch.bernoulli(torch.full(shape, random_share, device=draw_device),
                                generator=generator).bool() & chosen & ~to_mask
    allowed = allowed_random_ids(input_ids, special, vocab_size, mask_token_id, random_token_ids)
    allowed = allowed.to(draw_device)                                      # (R,)
    picks = torch.randint(len(allowed), shape, generator=generator, device=draw_device)  # (B, S)
    random_words = allowed[picks]                                          # (B, S)
    return apply_mask(input_ids, chosen, to_mask, to_random, random_words, mask_token_id)


def apply_mask(input_ids: torch.Tensor, chosen: torch.Tensor, to_mask: torch.Tensor, to_random: torch.Tensor,
               random_words: torch.Tensor, mask_token_id: int) -> MaskResult:
    """The masked copy, labels and kinds of decided positions, all (B, S) on the decisions' device (returned on
    the input's): ``to_mask`` and ``to_random`` lie within ``chosen``; ``random_words`` holds each position's
    random replacement."""
    device, draw_device, shape = input_ids.device, chosen.device, chosen.shape
    original = input_ids.to(draw_device)
    masked = original.clone()
    masked[to_mask] = mask_token_id
    masked[to_random] = random_words[to_random]
    labels = torch.where(chosen, original, torch.full_like(original, IGNORE_INDEX))
    kind = torch.zeros(shape, dtype=torch.long, device=draw_device)
    kind[chosen] = KIND_KEPT
    kind[to_mask] = KIND_MASK
    kind[to_random] = KIND_RANDOM
    return MaskResult(masked.to(device), labels.to(device), kind.to(device))


def allowed_random_ids(input_ids: torch.Tensor, special: torch.Tensor, vocab_size: int, mask_token_id: int,
                       random_token_ids: torch.Tensor | Sequence[int] | None) -> torch.Tensor:
    """(R,) the ids a random replacement may take: ``random_token_ids``, else every id below ``vocab_size`` but the
    mask token and the ids at ``special`` positions; ``ValueError`` when there are none."""
    if random_token_ids is not None:
        allowed = torch.as_tensor(random_token_ids, dtype=torch.long).flatten()
    else:
        keep = torch.ones(vocab_size, dtype=torch.bool)
        keep[mask_token_id] = False
        seen_special = input_ids.to(special.device)[special].cpu()
        keep[seen_special[(seen_special >= 0) & (seen_special < vocab_size)]] = False
        allowed = keep.nonzero().flatten()
    if allowed.numel() == 0:
        raise ValueError("no token ids are allowed as random replacements")
    return allowed


def whole_word_ids_from(input_ids: torch.Tensor, special_tokens_mask: torch.Tensor,
                        continuation: torch.Tensor, word_starts: torch.Tensor | None = None) -> torch.Tensor:
    """Word index per position (B, S) from a per-vocabulary "continues the word before it" mask (V,) (by the
    vocabulary's kind: ``engine.text.words.continues_word``); -1 at specials.

    A piece that is not a continuation starts a new word; so does a position marked in ``word_starts`` (B, S)
    (where a sentence begins: a byte-level vocabulary writes a text's first word without its word-start mark),
    and a continuation right after a special token (a truncated word) gets a word of its own.
    """
    special = special_tokens_mask.bool()                                  # (B, S)
    starts = ~continuation.to(input_ids.device)[input_ids] | special      # (B, S)
    if word_starts is not None:
        starts |= word_starts.to(device=input_ids.device, dtype=torch.bool)   # (B, S)
    starts[:, 0] = True
    words = starts.long().cumsum(dim=1) - 1                               # (B, S)
    return words.masked_fill(special, -1)
