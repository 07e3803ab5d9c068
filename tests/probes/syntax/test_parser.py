"""The attention-only parser: its features are each head's attention both ways, a map that points at the gold
heads parses perfectly, and the baseline is the best single offset chosen on the training sentences."""
from __future__ import annotations

import numpy as np
import pytest

from engine.probes.syntax.conllu import read_sample
from engine.probes.syntax.features import SentenceFeatures
from engine.probes.syntax.parser import attention_parser, best_offset, pair_features
from support.syntax_maps import gold_map


def test_pair_features_hold_each_heads_attention_both_ways() -> None:
    maps = np.arange(2 * 1 * 3 * 3, dtype=np.float32).reshape(2, 1, 3, 3)            # (L, nh, W, W)
    found = pair_features(maps)
    assert found.shape == (3, 3, 4)
    assert found[0, 2].tolist() == [maps[0, 0, 0, 2], maps[1, 0, 0, 2], maps[0, 0, 2, 0], maps[1, 0, 2, 0]]


def gold_features(sentences, noise_head: bool) -> SentenceFeatures:
    """Head 0 puts 0.5 on each word's gold head; head 1 (when asked) is noise."""
    rng = np.random.default_rng(0)
    maps = []
    for s in sentences:
        gold = gold_map(s)
        second = rng.random((len(s), len(s))) if noise_head else gold
        maps.append(np.stack([gold, second])[None].astype(np.float32))            # (1, 2, W, W)
    return SentenceFeatures("gold", list(sentences), maps, [np.zeros((1, len(s), 2)) for s in sentences], 1, 2)


def test_a_head_that_points_at_the_gold_heads_parses_perfectly() -> None:
    sentences = read_sample()[:60]
    result = attention_parser(gold_features(sentences, noise_head=True))
    assert result.uas == 1.0
    assert result.train_words + result.test_words == sum(len(s) - 1 for s in sentences)   # the root left out
    assert 0 < result.baseline_uas < 0.6 and result.baseline_offset in (-1, 1)
    assert result.to_pipeline()["uas"] == 1.0


def test_the_baseline_offset_is_the_most_often_right() -> None:
    words = [np.array([0, 1, 2]), np.array([0, 3])]
    heads = [np.array([1, 2, 1]), np.array([1, 2])]          # +1 right three times, -1 once
    assert best_offset(words, heads, max_offset=2) == 1
    assert best_offset([np.array([1])], [np.array([0])], max_offset=2) == -1


def test_too_few_sentences_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 2 sentences"):
        attention_parser(gold_features(read_sample()[:1], noise_head=False))
