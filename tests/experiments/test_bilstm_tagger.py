"""The paper's BiLSTM on frozen features reads a word's neighbours (a tag that only the previous word decides: the
BiLSTM gets it, the logistic regression on the word's own vector cannot), is the same on the same inputs, and counts
a tag it never trained on as wrong."""
from __future__ import annotations

import numpy as np
import pytest

from engine.experiments.bilstm_tagger import TaggerSettings, bilstm_accuracy, train_bilstm
from engine.probes.syntax.layer_probe import probe_accuracy

pytestmark = pytest.mark.usefixtures("one_thread")
WORDS = ("the", "to", "x", "dog", "run")


def one_hot(words: list[str]) -> np.ndarray:
    """(W, 5) one vector per word, the same wherever it stands."""
    return np.eye(len(WORDS))[[WORDS.index(w) for w in words]]


def sentences(count: int, seed: int) -> tuple[list[np.ndarray], list[tuple[str, ...]]]:
    """"the x dog" (x is a NOUN there) and "to x run" (x is a VERB): only the word before x says which."""
    rng = np.random.default_rng(seed)
    vectors, tags = [], []
    for _ in range(count):
        if rng.random() < 0.5:
            words, tagged = ["the", "x", "dog"], ("DET", "NOUN", "NOUN")
        else:
            words, tagged = ["to", "x", "run"], ("PART", "VERB", "VERB")
        vectors.append(one_hot(words))
        tags.append(tagged)
    return vectors, tags


def test_the_bilstm_reads_the_neighbours_the_logistic_regression_cannot() -> None:
    train, train_tags = sentences(64, 0)
    test, test_tags = sentences(32, 1)
    settings = TaggerSettings(hidden=16, updates=120)
    bilstm = bilstm_accuracy(train, train_tags, test, test_tags, settings)
    flat = np.concatenate(train), np.array([t for tags in train_tags for t in tags])
    logistic = probe_accuracy(*flat, np.concatenate(test), np.array([t for tags in test_tags for t in tags]))
    assert bilstm == 1.0
    assert logistic < 0.9                 # "x" alone is NOUN or VERB: about half of its third of the words wrong
    assert bilstm_accuracy(train, train_tags, test, test_tags, settings) == bilstm      # seeded: the same again


def test_a_tag_never_trained_on_counts_as_wrong_and_nothing_to_train_on_is_refused() -> None:
    train, train_tags = sentences(32, 0)
    test = [one_hot(["the", "dog"])]
    accuracy = bilstm_accuracy(train, train_tags, test, [("DET", "PROPN")], TaggerSettings(hidden=8, updates=60))
    assert accuracy <= 0.5                # PROPN is not among the training tags
    with pytest.raises(ValueError, match="needs training and held-out sentences"):
        bilstm_accuracy([], [], test, [("DET", "NOUN")])


def test_given_several_layers_it_learns_to_weigh_the_one_that_holds_the_tags() -> None:
    """The paper's "weighted sum" rows: three layers of each word, only the middle one says which word it is."""
    rng = np.random.default_rng(0)
    train, train_tags = sentences(96, 0)
    layered = [np.stack([rng.normal(size=v.shape), v, rng.normal(size=v.shape)], axis=1) for v in train]  # (W, 3, 5)
    model, _, _, _ = train_bilstm(layered, train_tags, TaggerSettings(hidden=16, updates=300))
    weights = model.mix.weights()
    assert len(weights) == 3 and abs(sum(weights) - 1) < 1e-6
    assert weights[1] == max(weights) and weights[1] > 0.4, weights     # they started equal, a third each
