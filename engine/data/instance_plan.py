"""BERT's pretraining instances, planned as token ranges of a ``TokenStore``.

The recipe is the original one (``create_pretraining_data.py`` in google-research/bert): per
document, fill a target length from consecutive sentences, split the chunk into segments A and B;
half the time B is the true continuation (IsNext, label 0), half the time B comes from another
document (NotNext, label 1) and the unused sentences are put back; 10% of instances get a shorter
random target; the longer segment is truncated first, from a random end. Deliberate differences:
so that the pairs are exactly what the labels claim, a NotNext B is always drawn from a *different*
document (the original retries 10 times and may give up), and an IsNext chunk of a single sentence
takes the document's next sentence too instead of becoming NotNext (keeps IsNext/NotNext at
50/50). The shorter target is drawn per instance, not once per document, so that about
``short_seq_prob`` of the instances (not of the documents) are short.

ALBERT's sentence-order prediction (``pair_task="sop"``, ``_ordered_pairs``) plans the same chunks, but B is
always the rest of A's chunk, and half the pairs are swapped (B first; label 1): every negative is a positive
pair turned round, the same tokens of the same document. Unlike ALBERT's script, which falls back to a random
document for a one-sentence chunk, a lone last sentence is cut in two at a random token (one token long, it
makes no pair), so no pair ever mixes documents. Its draws are its own: NSP plans exactly as before.

Consecutive sentences of one document are one slice of the store's tokens, and truncation only
takes tokens off either end, so every segment is a range: an instance is one row
``(a_start, a_end, b_start, b_end, is_random_next)`` (``b_start == b_end`` without NSP). Planning
reads only sentence offsets; tokens are read when a batch is made, by the process that trains on
it. The random draws are the same, in the same order, as the list-based version this replaced,
so a seeded plan makes the very instances it made.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from engine.data.token_store import TokenStore

PLAN_COLUMNS = 5      # a_start, a_end, b_start, b_end, is_random_next


@dataclass
class Instance:
    """One pretraining example before its special tokens are added; ``tokens_b`` empty without NSP.
    ``starts_a`` / ``starts_b``: where a sentence other than the segment's first begins in it (whole-word masking
    starts a word there); ``separators_a``: where ``tokens_a`` holds a separator between two documents (a packed
    input, ``engine.data.packing``), a special token."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool
    starts_a: tuple[int, ...] = ()
    starts_b: tuple[int, ...] = ()
    separators_a: tuple[int, ...] = ()


def check_lengths(max_seq_length: int, nsp: bool) -> None:
    """ValueError when ``max_seq_length`` cannot hold the specials and one token per segment."""
    specials = 3 if nsp else 2
    if max_seq_length < specials + (2 if nsp else 1):
        raise ValueError(f"max_seq_length={max_seq_length} is too small: need at least "
                         f"{specials + (2 if nsp else 1)} with {'NSP' if nsp else 'single segments'}")


def max_segment_tokens(max_seq_length: int, nsp: bool) -> int:
    """The most tokens one segment may hold: ``max_seq_length`` less its specials (3 with NSP, else 2); the
    length a store's sentences are cut to."""
    return max_seq_length - (3 if nsp else 2)


def plan_instances(store: TokenStore, pool: np.ndarray, positions: Sequence[int], max_seq_length: int,
                   short_seq_prob: float, nsp: bool, rng: random.Random, pair_task: str = "nsp") -> np.ndarray:
    """(N, 5) int64 rows of the instances of documents ``pool[p]`` for ``p`` in ``positions``, shuffled.

    ``pool`` (P,) holds the document ids a NotNext segment may come from (any but its own);
    NSP needs two of them. Uses ``rng`` exactly as the original list-based recipe did.
    ``pair_task`` ``"sop"``: the pairs are ALBERT's sentence order instead (``_ordered_pairs``), from one document.
    """
    check_lengths(max_seq_length, nsp)
    if pair_task not in ("nsp", "sop"):
        raise ValueError(f"pair_task must be nsp or sop, got {pair_task!r}")
    if nsp and pair_task == "sop":
        rows = [row for position in positions
                for row in _ordered_pairs(store.sentence_ends(int(pool[position])), max_seq_length - 3,
                                          short_seq_prob, rng)]
        rng.shuffle(rows)
        return np.asarray(rows, dtype=np.int64).reshape(-1, PLAN_COLUMNS)   # (N, 5)
    if nsp and len(pool) < 2:
        raise ValueError("need at least two documents for next-sentence prediction "
                         "(NotNext segments come from another document); add documents or turn NSP off")
    rows: list[tuple[int, int, int, int, int]] = []
    for position in positions:
        ends = store.sentence_ends(int(pool[position]))
        if nsp:
            rows.extend(_pairs(store, pool, int(position), ends, max_seq_length - 3, short_seq_prob, rng))
        else:
            rows.extend(_singles(ends, max_seq_length - 2, short_seq_prob, rng))
    rng.shuffle(rows)
    return np.asarray(rows, dtype=np.int64).reshape(-1, PLAN_COLUMNS)       # (N, 5)


def materialise(store: TokenStore, rows: np.ndarray) -> list[Instance]:
    """The instances of plan rows, their token ids read from the store, with where their sentences begin."""
    starts = store.sentence_starts

    def inside(first: int, end: int) -> tuple[int, ...]:
        low, high = np.searchsorted(starts, first, side="right"), np.searchsorted(starts, end, side="left")
        return tuple(int(s) - first for s in starts[low:high])
    return [Instance(store.token_ids(a0, a1), store.token_ids(b0, b1), bool(label), inside(a0, a1), inside(b0, b1))
            for a0, a1, b0, b1, label in rows.tolist()]


def _target_length(max_num_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _pairs(store: TokenStore, pool: np.ndarray, position: int, ends: list[int], max_num_tokens: int,
           short_seq_prob: float, rng: random.Random) -> list[tuple[int, int, int, int, int]]:
    """Rows of one document; ``ends[i]``/``ends[i+1]`` bound its sentence ``i`` in the tokens."""
    count = len(ends) - 1
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    rows = []
    first = 0                   # first sentence of the chunk
    length = 0
    i = 0
    while i < count:
        length += ends[i + 1] - ends[i]
        if i == count - 1 or length >= target:
            is_random_next = rng.random() < 0.5
            if not is_random_next and i == first:
                if i + 1 < count:                     # IsNext needs two sentences: take the next one
                    i += 1
                else:
                    is_random_next = True
            chunk = i + 1 - first
            a_end = rng.randint(1, chunk - 1) if chunk >= 2 else 1
            a = [ends[first], ends[first + a_end]]
            if is_random_next:
                b = _random_segment(store, pool, position, target - (a[1] - a[0]), rng)
                i -= chunk - a_end                    # put the unused sentences back
            else:
                b = [ends[first + a_end], ends[i + 1]]
            _truncate(a, b, max_num_tokens, rng)
            rows.append((a[0], a[1], b[0], b[1], int(is_random_next)))
            first, length = i + 1, 0
            target = _target_length(max_num_tokens, short_seq_prob, rng)
        i += 1
    return rows


def _ordered_pairs(ends: list[int], max_num_tokens: int, short_seq_prob: float,
                   rng: random.Random) -> list[tuple[int, int, int, int, int]]:
    """Sentence-order rows of one document: A and B consecutive, in order (label 0) or swapped (B first, label 1)."""
    count = len(ends) - 1
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    rows = []
    first, length, i = 0, 0, 0
    while i < count:
        length += ends[i + 1] - ends[i]
        if i == count - 1 or length >= target:
            if i == first and i + 1 < count:                 # a pair needs two sentences: take the next one
                i += 1
            chunk = i + 1 - first
            if chunk >= 2:
                cut = ends[first + rng.randint(1, chunk - 1)]
            elif ends[i + 1] - ends[first] >= 2:             # the document's lone last sentence: cut it in two
                cut = rng.randint(ends[first] + 1, ends[i + 1] - 1)
            else:
                cut = None                                   # one token: no pair
            if cut is not None:
                a, b = [ends[first], cut], [cut, ends[i + 1]]
                _truncate(a, b, max_num_tokens, rng)
                rows.append((*b, *a, 1) if rng.random() < 0.5 else (*a, *b, 0))
            first, length = i + 1, 0
            target = _target_length(max_num_tokens, short_seq_prob, rng)
        i += 1
    return rows


def _random_segment(store: TokenStore, pool: np.ndarray, position: int, target: int, rng: random.Random) -> list[int]:
    """Consecutive sentences of another pool document, from a random one on, until ``target`` tokens."""
    other = rng.randrange(len(pool) - 1)
    other = other + 1 if other >= position else other      # any document but this one
    ends = store.sentence_ends(int(pool[other]))
    start = rng.randrange(len(ends) - 1)
    stop = start + 1
    while stop < len(ends) - 1 and ends[stop] - ends[start] < target:
        stop += 1
    return [ends[start], ends[stop]]


def _singles(ends: list[int], max_num_tokens: int, short_seq_prob: float,
             rng: random.Random) -> list[tuple[int, int, int, int, int]]:
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    rows = []
    start = ends[0]
    for i in range(len(ends) - 1):
        if i == len(ends) - 2 or ends[i + 1] - start >= target:
            a = [start, ends[i + 1]]
            _truncate(a, [a[1], a[1]], max_num_tokens, rng)
            rows.append((a[0], a[1], a[1], a[1], 0))
            start = ends[i + 1]
            target = _target_length(max_num_tokens, short_seq_prob, rng)
    return rows


def _truncate(a: list[int], b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Shorten the longer range by one token at a time, from the front or back at random (in place)."""
    while (a[1] - a[0]) + (b[1] - b[0]) > max_num_tokens:
        longer = a if a[1] - a[0] > b[1] - b[0] else b
        if rng.random() < 0.5:
            longer[0] += 1
        else:
            longer[1] -= 1
