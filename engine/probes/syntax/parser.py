"""The attention-only parser (Clark et al. 2019, section 6, simplified): a linear score on every head's attention,
in both directions, picks each word's dependency head; trained on some sentences, scored (UAS) on the rest.

For a word ``i`` and a candidate head ``j`` (every other word of the sentence), the features are the ``2·L·nh``
numbers ``A[l, h, i, j]`` and ``A[l, h, j, i]`` (each head's word-level attention from ``i`` to ``j`` and back);
the score is their weighted sum, and a softmax over the candidates is trained (full batch, L-BFGS, L2) to put the
gold head first. The root's word (head 0) is left out of training and scoring. **UAS** = the share of held-out
words whose highest-scoring candidate is their gold head. **Baseline**: the best single fixed offset for every
word (relation-blind, chosen on the training sentences), scored on the same held-out words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine import cancellation
from engine.probes.syntax.features import SentenceFeatures
from engine.probes.syntax.heads import MAX_OFFSET, offset_order
from engine.probes.syntax.layer_probe import SEED, TEST_SHARE, split_sentences

L2 = 1e-3
MAX_ITER = 100


@dataclass
class ParserResult:
    """The attention-only parser's held-out UAS beside the fixed-offset baseline."""

    uas: float
    baseline_uas: float
    baseline_offset: int
    train_words: int
    test_words: int

    def to_pipeline(self) -> dict[str, Any]:
        return {"uas": self.uas, "baseline_uas": self.baseline_uas, "baseline_offset": self.baseline_offset,
                "train_words": self.train_words, "test_words": self.test_words}


def pair_features(maps: np.ndarray) -> np.ndarray:
    """``(W, W, 2·L·nh)`` features of one sentence's ``(L, nh, W, W)`` word maps: ``[i, j]`` holds every head's
    attention from ``i`` to ``j``, then from ``j`` to ``i``."""
    layers, heads, width, _ = maps.shape
    forward = maps.reshape(layers * heads, width, width)                  # (L·nh, W, W): [k, i, j] = i -> j
    return np.concatenate([forward.transpose(1, 2, 0), forward.transpose(2, 1, 0)], axis=-1)   # (W, W, 2·L·nh)


@dataclass
class _Words:
    """Every scored word's candidates, flattened: ``rows`` (M, F) features, ``index`` (N, Wmax) row of each
    candidate (padding: row 0, masked), ``mask`` (N, Wmax) True where a candidate exists and is not the word
    itself, ``gold`` (N,) the gold head's column; ``words`` / ``heads`` per sentence for the baseline."""

    rows: torch.Tensor
    index: torch.Tensor
    mask: torch.Tensor
    gold: torch.Tensor
    words: list[np.ndarray]
    heads: list[np.ndarray]


def _gather(features: SentenceFeatures, indices: np.ndarray) -> _Words:
    rows, index, mask, gold, words, heads = [], [], [], [], [], []
    width = max(len(features.sentences[i]) for i in indices)
    start = 0
    for i in indices:
        sentence = features.sentences[i]
        keep = np.array([k for k, h in enumerate(sentence.heads) if h > 0], dtype=np.int64)
        head = np.array([sentence.heads[k] - 1 for k in keep], dtype=np.int64)
        n = len(sentence)
        full = pair_features(features.attention[i])                                      # (W, W, F)
        pairs = full[keep].reshape(len(keep) * n, full.shape[-1])                         # (n_keep · W, F)
        rows.append(pairs.astype(np.float32))
        for row, k in enumerate(keep):
            index.append(np.pad(start + row * n + np.arange(n), (0, width - n)))
            mask.append(np.pad(np.arange(n) != k, (0, width - n)))
        start += len(keep) * n
        gold.append(head)
        words.append(keep)
        heads.append(head)
    if not index:
        raise ValueError("the attention parser needs words with a head (not the root) in both parts of the split")
    return _Words(torch.from_numpy(np.concatenate(rows)), torch.from_numpy(np.stack(index)),
                  torch.from_numpy(np.stack(mask)), torch.from_numpy(np.concatenate(gold)), words, heads)


def _log_probs(found: _Words, weights: torch.Tensor) -> torch.Tensor:
    """(N, Wmax) log-softmax of the candidates' scores, ``-inf`` where there is no candidate."""
    scores = (found.rows @ weights)[found.index]                           # (M,) -> (N, Wmax)
    return torch.log_softmax(scores.masked_fill(~found.mask, float("-inf")), dim=-1)


def attention_parser(features: SentenceFeatures, test_share: float = TEST_SHARE, seed: int = SEED,
                     l2: float = L2, max_iter: int = MAX_ITER) -> ParserResult:
    """Train the parser on a seeded share of the sentences and score it on the rest (the layer probe's split)."""
    train_ids, test_ids = split_sentences(len(features.sentences), test_share, seed)
    train, test = _gather(features, train_ids), _gather(features, test_ids)
    weights = torch.zeros(train.rows.shape[1], dtype=torch.float32, requires_grad=True)
    optimizer = torch.optim.LBFGS([weights], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        cancellation.check()
        optimizer.zero_grad()
        picked = _log_probs(train, weights).gather(1, train.gold[:, None])             # (N, 1)
        loss = -picked.mean() + l2 * (weights * weights).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        right = int((_log_probs(test, weights.detach()).argmax(-1) == test.gold).sum())   # ties: the leftmost
    offset = best_offset(train.words, train.heads)
    baseline = sum(int(((w + offset) == h).sum()) for w, h in zip(test.words, test.heads))
    total = int(test.gold.numel())
    return ParserResult(uas=right / max(total, 1), baseline_uas=baseline / max(total, 1), baseline_offset=offset,
                        train_words=int(train.gold.numel()), test_words=total)


def best_offset(words: list[np.ndarray], heads: list[np.ndarray], max_offset: int = MAX_OFFSET) -> int:
    """The offset right most often over every word (ties as in ``heads.offset_order``)."""
    hits = [sum(int(((w + k) == h).sum()) for w, h in zip(words, heads)) for k in offset_order(max_offset)]
    return offset_order(max_offset)[int(np.argmax(hits))]
