"""How pretraining text is cut into inputs (RoBERTa's §4.2, Liu et al. 2019): ``PretrainingObjective.packing``.

- ``segment-pair`` (the default, BERT's): two segments of consecutive sentences per input, with next-sentence
  pairs (``engine.data.instance_plan``: exactly the instances made before packing existed), or one segment
  without NSP.
- ``sentence-pair``: RoBERTa's SENTENCE-PAIR+NSP: each segment is one natural sentence; B is the sentence after A
  (IsNext) or a sentence of another document (NotNext), half and half. Needs NSP.
- ``full-sentences``: each input packed with whole sentences read contiguously, up to the input's length, and
  going on into the next document when one ends, with one extra separator token (the tokenizer's own, by role)
  between the two documents. One segment, no sentence pairs: NSP off.
- ``doc-sentences``: the same, but an input never crosses a document's end (an input near a document's end is
  shorter). RoBERTa then grew the batch to keep the tokens per batch; an experiment's arm does the same with
  ``tokens_like`` (``engine.experiments.token_budget``); a run by itself keeps its batch size.

Unlike the segment pairs, the packed inputs take no shorter random target (``short_seq_prob``): each is filled up
to the length. A sentence longer than an input (a store cut for another length) goes on into the next input.

A packed input is read from its *pieces*, token ranges of the ``TokenStore`` (one per document it reads), kept as
plan rows ``(start_1, end_1, start_2, end_2, ...)`` as wide as the block's widest input (padded with empty
pieces): an even width, never the 5 columns of a segment-pair row (``is_packed``). ``plan_rows``,
``materialise_rows`` and ``join_rows`` take either kind.
"""
from __future__ import annotations

import random
from typing import Sequence

import numpy as np
import torch

from engine.data.instance_plan import (
    PLAN_COLUMNS, Instance, _random_segment, _truncate, check_lengths, materialise, plan_instances,
)
from engine.data.token_store import TokenStore

PACKINGS = ("segment-pair", "sentence-pair", "full-sentences", "doc-sentences")
PACKING_NAMES = {"segment-pair": "segment pairs", "sentence-pair": "sentence pairs",
                 "full-sentences": "full sentences across documents", "doc-sentences": "full sentences per document"}
PACKED = ("full-sentences", "doc-sentences")          # one text per input, no sentence pairs


def check_layout(packing: str, nsp: bool, causal: bool) -> None:
    """``ValueError`` when the packing (or the left-to-right LM) and next-sentence pairs do not go together."""
    if causal and nsp:
        raise ValueError("the left-to-right LM (objective clm) reads one text per row, not sentence pairs: "
                         "turn next-sentence prediction off")
    if packing in PACKED and nsp:
        raise ValueError(f"packing {packing} (RoBERTa) packs one text per input with no sentence pairs: turn "
                         f"next-sentence prediction off")
    if packing == "sentence-pair" and not nsp:
        raise ValueError("packing sentence-pair makes next-sentence pairs of single sentences: keep next-sentence "
                         "prediction on")


def is_packed(rows: np.ndarray) -> bool:
    """Whether plan rows are packed pieces (an even width) rather than segment pairs (5 columns)."""
    return rows.shape[1] != PLAN_COLUMNS


def plan_rows(store: TokenStore, pool: np.ndarray, positions: Sequence[int], max_seq_length: int,
              short_seq_prob: float, nsp: bool, rng: random.Random, pair_task: str = "nsp",
              packing: str = "segment-pair") -> np.ndarray:
    """The plan rows of documents ``pool[p]`` for ``p`` in ``positions``, shuffled, as ``packing`` cuts them
    (``segment-pair``: ``plan_instances``, its draws unchanged)."""
    if packing == "segment-pair":
        return plan_instances(store, pool, positions, max_seq_length, short_seq_prob, nsp, rng, pair_task)
    check_layout(packing, nsp, False)
    if packing == "sentence-pair":
        return _sentence_pairs(store, pool, positions, max_seq_length, rng)
    if packing not in PACKED:
        raise ValueError(f"packing must be one of {', '.join(PACKINGS)}, got {packing!r}")
    check_lengths(max_seq_length, False)
    budget, cross = max_seq_length - 2, packing == "full-sentences"
    inputs: list[list[int]] = []          # each: start, end of each piece
    current: list[int] = []
    used = 0
    for position in positions:
        ends = store.sentence_ends(int(pool[position]))
        if current and not cross:         # doc-sentences: a document's end ends the input
            inputs.append(current)
            current, used = [], 0
        new_document = True
        for start, end in zip(ends[:-1], ends[1:]):
            for a in range(start, end, budget):               # a sentence longer than an input: input-sized parts
                b = min(end, a + budget)
                gap = 1 if current and new_document else 0    # the separator between two documents
                if used + gap + b - a > budget:
                    inputs.append(current)
                    current, used, gap = [], 0, 0
                if current and not new_document:              # this document's text goes on: the same piece
                    current[-1] = b
                else:
                    current += [a, b]
                used += gap + b - a
                new_document = False
    if current:
        inputs.append(current)
    rng.shuffle(inputs)
    width = 2 * max((len(pieces) // 2 for pieces in inputs), default=1)
    rows = np.zeros((len(inputs), width), dtype=np.int64)                     # (N, 2K)
    for r, pieces in enumerate(inputs):
        rows[r, :len(pieces)] = pieces
    return rows


def materialise_rows(store: TokenStore, rows: np.ndarray, separator: int) -> list[Instance]:
    """The instances of plan rows of either kind; a packed input's documents are joined by ``separator`` (the
    tokenizer's separator id), whose positions the instance lists in ``separators_a``."""
    if not is_packed(rows):
        return materialise(store, rows)
    starts = store.sentence_starts
    instances = []
    for row in rows.tolist():
        tokens: list[int] = []
        separators: list[int] = []
        sentence_starts: list[int] = []
        for a, b in zip(row[0::2], row[1::2]):
            if b <= a:                                        # padding: no more pieces
                break
            if tokens:                                        # a later document: a separator, then its first sentence
                separators.append(len(tokens))
                tokens.append(separator)
                sentence_starts.append(len(tokens))
            low, high = np.searchsorted(starts, a, side="right"), np.searchsorted(starts, b, side="left")
            sentence_starts += [len(tokens) + int(s) - a for s in starts[low:high]]
            tokens += store.token_ids(a, b)
        instances.append(Instance(tokens, [], False, tuple(sentence_starts), (), tuple(separators)))
    return instances


def packed_offsets(rows: np.ndarray, width: int) -> torch.Tensor:
    """(B, S) each position's offset in the store for packed rows laid out ``cls pieces-joined-by-sep sep`` (-1 at
    the specials, the separators and padding): what static masking hashes."""
    offsets = torch.full((len(rows), width), -1, dtype=torch.long)                    # (B, S)
    for r, row in enumerate(np.asarray(rows, dtype=np.int64).tolist()):
        at = 1
        for a, b in zip(row[0::2], row[1::2]):
            if b <= a:
                break
            at += at > 1                                      # the separator before a later document
            offsets[r, at:at + b - a] = torch.arange(a, b)
            at += b - a
    return offsets


def join_rows(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Plan rows of several blocks as one array (packed rows padded with empty pieces to the widest)."""
    width = max(part.shape[1] for part in parts)
    return np.concatenate([part if part.shape[1] == width else
                           np.pad(part, ((0, 0), (0, width - part.shape[1]))) for part in parts])


def _sentence_pairs(store: TokenStore, pool: np.ndarray, positions: Sequence[int], max_seq_length: int,
                    rng: random.Random) -> np.ndarray:
    """Segment-pair rows whose segments are single sentences: A a sentence, B the next one (IsNext) or, half the
    time, a sentence of another document (NotNext; A's successor is then the next A). Cut to fit as BERT's."""
    if len(pool) < 2:
        raise ValueError("need at least two documents for next-sentence prediction (NotNext segments come from "
                         "another document); add documents or turn NSP off")
    check_lengths(max_seq_length, True)
    rows = []
    for position in positions:
        ends = store.sentence_ends(int(pool[position]))
        i = 0
        while i < len(ends) - 1:
            a = [ends[i], ends[i + 1]]
            is_random_next = rng.random() < 0.5 or i + 2 >= len(ends)
            if is_random_next:
                other = _random_segment(store, pool, int(position), 1, rng)        # one sentence of another
                b, i = other, i + 1
            else:
                b, i = [ends[i + 1], ends[i + 2]], i + 2
            _truncate(a, b, max_seq_length - 3, rng)
            rows.append((a[0], a[1], b[0], b[1], int(is_random_next)))
    rng.shuffle(rows)
    return np.asarray(rows, dtype=np.int64).reshape(-1, PLAN_COLUMNS)       # (N, 5)
