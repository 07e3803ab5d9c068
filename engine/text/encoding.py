"""``Encoding``: what the tokenizer makes of one text or text pair (plain lists, no tensors)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Encoding:
    """One encoded text or text pair, unpadded, as plain Python lists of equal length S."""

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]          # character span in its own text (text or text_pair); (0, 0) for specials
    special_tokens_mask: list[int]          # 1 for [CLS]/[SEP]/[PAD], 0 otherwise
    word_ids: list[int | None]              # index of the source word within its sequence; None for specials
    sequence_ids: list[int | None]          # 0 for text, 1 for text_pair, None for specials
    truncated: bool                         # True if tokens were dropped to fit max_length
    num_truncated_tokens: int               # how many were dropped
    # the pieces as a reader sees them (``Tokenizer.display_piece``: byte-level decoded, ``▁`` a word start);
    # what every view shows. ``tokens`` stays the vocabulary's own spelling.
    shown: list[str] = field(default_factory=list)
