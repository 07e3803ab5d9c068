"""Which attention heads find dependencies (Clark et al. 2019): each head as a predictor of the gold head word,
per relation and direction, beside the best fixed-offset baseline.

Two directions, for every dependency arc (dependent ``d``, head ``h``, relation ``r``; the root's arc to 0 has
no word and is left out):

* ``DEP_TO_HEAD``: the word ``d`` attends most to (itself excluded) is ``h``;
* ``HEAD_TO_DEP``: the word ``h`` attends most to (itself excluded) is ``d``.

A head's accuracy for ``r`` is the share of ``r``'s arcs it gets right. **Ties** (two words with the same
largest attention) go to the **leftmost** word. The **baseline** for ``r`` is the best fixed offset: the word at
``d + k`` (``h + k`` in the other direction) for the ``k`` in ``-K..K`` (``k != 0``) that is right most often
for ``r``, chosen on the same data (ties to the smaller ``|k|``, then the negative one); an offset past the
sentence's ends is wrong. Words are the CoNLL-U's syntactic words, punctuation included.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import cancellation
from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.features import SentenceFeatures

DEP_TO_HEAD = "dependent → head"
HEAD_TO_DEP = "head → dependent"
DIRECTIONS = (DEP_TO_HEAD, HEAD_TO_DEP)
MAX_OFFSET = 5
MIN_COUNT = 10          # relations with fewer arcs than this are left out (too few to score)


@dataclass
class HeadScores:
    """Every head's accuracy per relation and direction, with the fixed-offset baseline."""

    source: str
    relations: list[str]                          # R, most arcs first
    counts: np.ndarray                            # (R,) arcs of each relation
    accuracy: dict[str, np.ndarray]               # direction -> (R, L, nh) in [0, 1]
    baseline: dict[str, np.ndarray]               # direction -> (R,) the best offset's accuracy
    offset: dict[str, np.ndarray]                 # direction -> (R,) that offset (words to the right if > 0)
    examples: list[str]                           # (R,) a sentence with that relation (its text)
    num_sentences: int
    num_words: int
    skipped: list[tuple[int, str]]

    def best_heads(self, direction: str | None = None) -> list[dict[str, Any]]:
        """Per relation, the head with the highest accuracy (``direction`` None: over both), its baseline and
        by how much it beats it: rows ``{relation, count, direction, layer, head, accuracy, baseline, offset,
        margin, example}``; ``layer`` counts encoder layers from 1 (the app's numbering), ``head`` from 0."""
        directions = DIRECTIONS if direction is None else (check_direction(direction),)
        rows = []
        for r, relation in enumerate(self.relations):
            best = max(((d, *np.unravel_index(int(np.argmax(self.accuracy[d][r])), self.accuracy[d][r].shape))
                        for d in directions), key=lambda t: (self.accuracy[t[0]][r][t[1], t[2]], -directions.index(t[0])))
            d, layer, head = best
            accuracy = float(self.accuracy[d][r][layer, head])
            rows.append({"relation": relation, "count": int(self.counts[r]), "direction": d, "layer": int(layer) + 1,
                         "head": int(head), "accuracy": accuracy, "baseline": float(self.baseline[d][r]),
                         "offset": int(self.offset[d][r]), "margin": accuracy - float(self.baseline[d][r]),
                         "example": self.examples[r]})
        return rows

    def beaten(self, direction: str | None = None) -> list[str]:
        """The relations whose best head beats the baseline (strictly)."""
        return [row["relation"] for row in self.best_heads(direction) if row["margin"] > 0]

    def to_pipeline(self) -> dict[str, Any]:
        """Plain JSON: relations, counts, per direction the (R, L, nh) accuracies and baselines, best heads."""
        return {"source": self.source, "relations": list(self.relations), "counts": self.counts.tolist(),
                "accuracy": {d: a.round(6).tolist() for d, a in self.accuracy.items()},
                "baseline": {d: b.round(6).tolist() for d, b in self.baseline.items()},
                "offset": {d: o.tolist() for d, o in self.offset.items()}, "best_heads": self.best_heads(),
                "num_sentences": self.num_sentences, "num_words": self.num_words,
                "skipped": [{"sentence": i, "reason": why} for i, why in self.skipped],
                "layer_numbering": "layers of attention from 1, heads from 0"}


def check_direction(direction: str) -> str:
    """``direction`` when it is one of :data:`DIRECTIONS`, else a ``ValueError`` naming them."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(map(repr, DIRECTIONS))}, got {direction!r}")
    return direction


def arcs(sentence: DependencySentence) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The sentence's arcs as 0-based ``(dependents, heads)`` and their relations (the root's arc left out)."""
    keep = [i for i, h in enumerate(sentence.heads) if h > 0]
    return (np.array(keep, dtype=np.int64), np.array([sentence.heads[i] - 1 for i in keep], dtype=np.int64),
            [sentence.relations[i] for i in keep])


def most_attended(maps: np.ndarray) -> np.ndarray:
    """For ``(..., W, W)`` word maps, the word each word attends to most, itself excluded, ties to the leftmost
    -> ``(..., W)`` indices."""
    width = maps.shape[-1]
    masked = np.where(np.eye(width, dtype=bool), -np.inf, maps)
    return masked.argmax(axis=-1)                    # numpy's argmax takes the first of equal values


def offset_hits(sentences: Sequence[DependencySentence], relations: Sequence[str],
                max_offset: int = MAX_OFFSET) -> dict[str, np.ndarray]:
    """``direction -> (R, 2K)`` arcs the fixed offset ``k`` gets right, offsets in :func:`offset_order`."""
    offsets = offset_order(max_offset)
    index = {r: i for i, r in enumerate(relations)}
    hits = {d: np.zeros((len(relations), len(offsets))) for d in DIRECTIONS}
    for sentence in sentences:
        deps, heads, rels = arcs(sentence)
        for dep, head, rel in zip(deps, heads, rels):
            if rel in index:
                for j, k in enumerate(offsets):
                    hits[DEP_TO_HEAD][index[rel], j] += dep + k == head
                    hits[HEAD_TO_DEP][index[rel], j] += head + k == dep
    return hits


def offset_order(max_offset: int = MAX_OFFSET) -> list[int]:
    """The offsets ``-K..K`` without 0, in the order ties are settled: smaller ``|k|`` first, negative first."""
    return sorted((k for k in range(-max_offset, max_offset + 1) if k), key=lambda k: (abs(k), k))


def relation_counts(sentences: Sequence[DependencySentence], min_count: int = MIN_COUNT) -> list[tuple[str, int]]:
    """``(relation, arcs)`` with at least ``min_count`` arcs, most arcs first (ties by name)."""
    counts = Counter(r for s in sentences for r in arcs(s)[2])
    return sorted(((r, c) for r, c in counts.items() if c >= min_count), key=lambda t: (-t[1], t[0]))


def distinct_examples(sentences: Sequence[DependencySentence], relations: Sequence[str]) -> list[str]:
    """One example sentence (its text) per relation, a different one for each relation wherever the data allows:
    a maximum matching of relations to the sentences holding them (augmenting paths), the rarest relation (fewest
    sentences) placed first, each trying its shortest sentences first (fewest words, then file order). A relation
    left unmatched (every sentence of it needed by another) repeats its shortest sentence."""
    holding: dict[str, list[str]] = {r: [] for r in relations}
    for sentence in sorted(sentences, key=len):                       # a stable sort: file order among equals
        text = sentence.text or " ".join(sentence.words)
        for relation in set(arcs(sentence)[2]) & holding.keys():
            holding[relation].append(text)
    owner: dict[str, str] = {}                                         # text -> the relation it is the example of

    def place(relation: str, seen: set[str]) -> bool:
        for text in holding[relation]:
            if text not in seen:
                seen.add(text)
                if text not in owner or place(owner[text], seen):     # free, or its relation moves to another
                    owner[text] = relation
                    return True
        return False

    order = {r: i for i, r in enumerate(relations)}
    for relation in sorted(relations, key=lambda r: (len(holding[r]), order[r])):
        place(relation, set())
    example = {relation: text for text, relation in owner.items()}
    return [example.get(r) or (holding[r][0] if holding[r] else "") for r in relations]


def head_scores(features: SentenceFeatures, min_count: int = MIN_COUNT, max_offset: int = MAX_OFFSET) -> HeadScores:
    """Every head's accuracy per relation and direction on ``features``, and the fixed-offset baselines."""
    chosen = relation_counts(features.sentences, min_count)
    if not chosen:
        raise ValueError(f"no relation has {min_count} or more arcs in these sentences; give more sentences")
    relations = [r for r, _ in chosen]
    index = {r: i for i, r in enumerate(relations)}
    shape = (len(relations), features.num_layers * features.num_heads)
    right = {d: np.zeros(shape) for d in DIRECTIONS}
    for sentence, maps in zip(features.sentences, features.attention):
        cancellation.check()
        deps, heads, rels = arcs(sentence)
        keep = np.array([r in index for r in rels], dtype=bool)
        if not keep.any():
            continue
        deps, heads = deps[keep], heads[keep]
        rows = np.array([index[r] for r, k in zip(rels, keep) if k])
        picked = most_attended(maps).reshape(-1, maps.shape[-1])        # (L * nh, W)
        np.add.at(right[DEP_TO_HEAD], rows, (picked[:, deps] == heads).T)   # (A, L * nh)
        np.add.at(right[HEAD_TO_DEP], rows, (picked[:, heads] == deps).T)
    counts = np.array([c for _, c in chosen], dtype=float)
    hits = offset_hits(features.sentences, relations, max_offset)
    offsets = np.array(offset_order(max_offset))
    best = {d: hits[d].argmax(axis=1) for d in DIRECTIONS}               # first of equal: the tie order
    examples = distinct_examples(features.sentences, relations)
    return HeadScores(
        source=features.source, relations=relations, counts=counts.astype(int),
        accuracy={d: (right[d] / counts[:, None]).reshape(len(relations), features.num_layers, features.num_heads)
                  for d in DIRECTIONS},
        baseline={d: hits[d][np.arange(len(relations)), best[d]] / counts for d in DIRECTIONS},
        offset={d: offsets[best[d]] for d in DIRECTIONS}, examples=examples,
        num_sentences=len(features.sentences), num_words=sum(len(s) for s in features.sentences),
        skipped=list(features.skipped))
