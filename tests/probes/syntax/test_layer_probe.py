"""The UPOS probe: a separable toy is learnt, noise is not, the control task is seeded and follows the tag
distribution, selectivity is accuracy minus control accuracy, and the split keeps sentences whole."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.features import SentenceFeatures
from engine.probes.syntax.layer_probe import (
    control_tags, layer_probe, majority_accuracy, probe_accuracy, split_sentences,
)

TAGS = ("NOUN", "VERB", "DET")


def toy(count: int = 60, seed: int = 0) -> SentenceFeatures:
    """Sentences of 6 words; layer 0 = noise, layer 1 = the tag's own direction plus a little noise (separable)."""
    rng = np.random.default_rng(seed)
    sentences, vectors = [], []
    for n in range(count):
        tags = tuple(rng.choice(TAGS, size=6))
        words = tuple(f"w{rng.integers(0, 400)}" for _ in tags)
        sentences.append(DependencySentence(words, (0,) + (1,) * 5, ("root",) + ("dep",) * 5, tags))
        noise = rng.normal(size=(6, 8))
        signal = np.stack([np.eye(8)[TAGS.index(t)] * 4 for t in tags]) + 0.3 * rng.normal(size=(6, 8))
        vectors.append(np.stack([noise, signal]).astype(np.float32))           # (L + 1, W, H)
    return SentenceFeatures("toy", sentences, [np.zeros((1, 1, 6, 6))] * count, vectors, num_layers=1, num_heads=1)


def test_a_separable_toy_is_learnt_and_noise_is_not() -> None:
    result = layer_probe(toy())
    assert result.layers == [0, 1]
    assert result.accuracy[1] == 1.0                                # linearly separable: every held-out word right
    assert result.accuracy[0] < 0.6                                 # noise: about a third (three tags)
    np.testing.assert_allclose(result.selectivity, result.accuracy - result.control_accuracy)
    assert result.best_layer == 1
    assert result.train_sentences == 45 and result.test_sentences == 15
    assert result.train_words == 270 and result.test_words == 90
    plain = result.to_pipeline()
    assert plain["best_layer"] == 1 and plain["layers"][1]["accuracy"] == 1.0
    assert plain["representation"] == "the mean of the word's pieces"


def test_probe_accuracy_on_two_points_and_on_one_class() -> None:
    x = np.array([[0.0], [0.1], [1.0], [1.1]])
    y = np.array(["A", "A", "B", "B"])
    assert probe_accuracy(x, y, np.array([[0.05], [1.05]]), np.array(["A", "B"])) == 1.0
    assert probe_accuracy(x, np.array(["A"] * 4), x, np.array(["A", "A", "B", "A"])) == 0.75


def test_control_tags_are_seeded_per_type_and_follow_the_distribution() -> None:
    types = [f"t{i}" for i in range(4000)]
    tags = ["NOUN"] * 70 + ["VERB"] * 30
    first = control_tags(types, tags, seed=1)
    assert first == control_tags(list(reversed(types)) + types[:10], tags, seed=1)   # order and repeats: no matter
    assert first != control_tags(types, tags, seed=2)
    share = Counter(first.values())["NOUN"] / len(first)
    assert 0.66 < share < 0.74 and set(first.values()) == {"NOUN", "VERB"}


def test_the_split_keeps_sentences_whole_and_is_seeded() -> None:
    train, test = split_sentences(10, 0.3, seed=4)
    assert len(train) == 7 and len(test) == 3 and not set(train) & set(test)
    assert sorted([*train, *test]) == list(range(10))
    assert np.array_equal(split_sentences(10, 0.3, seed=4)[1], test)
    assert len(split_sentences(2, 0.9)[0]) == 1                     # always one sentence on each side
    with pytest.raises(ValueError, match="at least 2 sentences"):
        split_sentences(1)
    with pytest.raises(ValueError, match="test_share"):
        split_sentences(10, 1.5)


def test_majority_baseline_is_a_lookup_table() -> None:
    assert majority_accuracy(["a", "a", "a", "b"], ["X", "X", "Y", "Z"], ["a", "b", "c"], ["X", "Z", "X"]) == 1.0
    assert majority_accuracy(["a"], ["X"], ["b"], ["Y"]) == 0.0
