"""Which layers hold parts of speech: a linear probe (logistic regression) per layer on word vectors, beside
Hewitt & Liang's (2019) control task.

* **Words and vectors:** each word's vector at a layer is the mean of its pieces' vectors (``features``); layer 0
  is the embeddings' output, layers 1..L the encoder layers'.
* **Split:** the sentences are shuffled with ``seed`` and the last ``test_share`` of them held out (whole
  sentences, so a sentence never feeds both sides).
* **Probe:** multinomial logistic regression (scikit-learn, L2 with ``C``, lbfgs to ``TOL``, at most ``MAX_ITER``
  iterations), on vectors standardised with the training words' mean and spread; accuracy = share of held-out
  words whose UPOS it gets right.
* **Control task:** every word type (the form, lowercased) gets one random tag, drawn once with ``seed`` from the
  training words' UPOS distribution; the same probe learns those tags. A probe that does as well on the control
  task is memorising word types, not reading syntax from the vectors; **selectivity** = accuracy - control
  accuracy.
"""
from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import cancellation
from engine.probes.syntax.features import SentenceFeatures

TEST_SHARE = 0.25
SEED = 0
C = 1.0
MAX_ITER = 100
TOL = 1e-3               # lbfgs stops once the loss moves less than this: held-out accuracy within 0.5 pt of 1e-4's
REPRESENTATION = "the mean of the word's pieces"


@dataclass
class LayerProbeResult:
    """UPOS probe accuracy, control-task accuracy and selectivity at each layer (0 = embeddings' output)."""

    source: str
    layers: list[int]                    # 0..L
    accuracy: np.ndarray                 # (L + 1,) held-out accuracy on UPOS
    control_accuracy: np.ndarray         # (L + 1,) held-out accuracy on the control tags
    majority: float                      # held-out accuracy of each word type's most frequent training tag
    train_words: int
    test_words: int
    train_sentences: int
    test_sentences: int
    seed: int
    representation: str = REPRESENTATION

    @property
    def selectivity(self) -> np.ndarray:
        """``accuracy - control_accuracy`` per layer."""
        return self.accuracy - self.control_accuracy

    @property
    def best_layer(self) -> int:
        """The layer with the highest selectivity (the lowest such layer on ties)."""
        return int(np.argmax(self.selectivity))

    def records(self) -> list[dict[str, Any]]:
        """One row per layer: layer, accuracy, control accuracy, selectivity."""
        return [{"layer": layer, "accuracy": float(a), "control_accuracy": float(c), "selectivity": float(a - c)}
                for layer, a, c in zip(self.layers, self.accuracy, self.control_accuracy)]

    def to_pipeline(self) -> dict[str, Any]:
        """Plain JSON: per layer rows, the majority baseline, the split and how words were represented."""
        return {"source": self.source, "layers": self.records(), "best_layer": self.best_layer,
                "majority_baseline": self.majority, "train_words": self.train_words, "test_words": self.test_words,
                "train_sentences": self.train_sentences, "test_sentences": self.test_sentences,
                "seed": self.seed, "representation": self.representation,
                "layer_numbering": "0 = the embeddings' output, 1..L = the encoder layers"}


def split_sentences(count: int, test_share: float = TEST_SHARE, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Sentence indices ``(train, test)``: a seeded shuffle, the last ``test_share`` held out (at least one each)."""
    if count < 2:
        raise ValueError(f"the layer probe needs at least 2 sentences (one to train on, one to test), got {count}")
    if not 0 < test_share < 1:
        raise ValueError(f"test_share must be between 0 and 1, got {test_share}")
    order = np.random.default_rng(seed).permutation(count)
    held = min(count - 1, max(1, round(count * test_share)))
    return np.sort(order[:count - held]), np.sort(order[count - held:])


def control_tags(types: Sequence[str], tags: Sequence[str], seed: int = SEED) -> dict[str, str]:
    """Hewitt & Liang's control task: each word type (sorted, so the draw does not depend on order) gets a tag
    drawn with ``seed`` from the distribution of ``tags``."""
    counts = Counter(tags)
    names = sorted(counts)
    weights = np.array([counts[n] for n in names], dtype=float)
    unique = sorted(set(types))
    drawn = np.random.default_rng(seed).choice(len(names), size=len(unique), p=weights / weights.sum())
    return {word: names[i] for word, i in zip(unique, drawn)}


def probe_predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, c: float = C,
                  max_iter: int = MAX_ITER) -> np.ndarray:
    """The (M,) labels a multinomial logistic regression fitted on standardised ``train_x`` (N, D) gives
    ``test_x`` (M, D)."""
    from sklearn.linear_model import LogisticRegression

    if len(set(train_y.tolist())) < 2:                       # one class: the probe can only say it
        return np.full(len(test_x), train_y[0])
    mean, spread = train_x.mean(axis=0), train_x.std(axis=0) + 1e-6
    model = LogisticRegression(C=c, max_iter=max_iter, tol=TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                      # not converged in max_iter: its answers are still read
        model.fit((train_x - mean) / spread, train_y)
    return model.predict((test_x - mean) / spread)


def probe_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
                   c: float = C, max_iter: int = MAX_ITER) -> float:
    """Held-out accuracy of a multinomial logistic regression fitted on standardised ``train_x`` (N, D)."""
    return float(np.mean(probe_predict(train_x, train_y, test_x, c, max_iter) == test_y))


def layer_probe(features: SentenceFeatures, test_share: float = TEST_SHARE, seed: int = SEED, c: float = C,
                max_iter: int = MAX_ITER) -> LayerProbeResult:
    """The UPOS probe and its control task at every layer of ``features`` (cancellation checked per layer)."""
    train, test = split_sentences(len(features.sentences), test_share, seed)

    def gather(indices: np.ndarray) -> tuple[list[str], list[str], np.ndarray]:
        words = [w.lower() for i in indices for w in features.sentences[i].words]
        tags = [t for i in indices for t in features.sentences[i].upos]
        vectors = np.concatenate([features.vectors[i] for i in indices], axis=1)       # (L + 1, N, H)
        return words, tags, vectors

    train_words, train_tags, train_x = gather(train)
    test_words, test_tags, test_x = gather(test)
    control = control_tags(train_words + test_words, train_tags, seed)
    y_train, y_test = np.array(train_tags), np.array(test_tags)
    c_train = np.array([control[w] for w in train_words])
    c_test = np.array([control[w] for w in test_words])
    accuracy, control_accuracy = [], []
    for layer in range(train_x.shape[0]):
        cancellation.check()
        accuracy.append(probe_accuracy(train_x[layer], y_train, test_x[layer], y_test, c, max_iter))
        control_accuracy.append(probe_accuracy(train_x[layer], c_train, test_x[layer], c_test, c, max_iter))
    return LayerProbeResult(source=features.source, layers=list(range(train_x.shape[0])),
                            accuracy=np.array(accuracy), control_accuracy=np.array(control_accuracy),
                            majority=majority_accuracy(train_words, train_tags, test_words, test_tags),
                            train_words=len(train_words), test_words=len(test_words), train_sentences=len(train),
                            test_sentences=len(test), seed=seed)


def majority_accuracy(train_words: Sequence[str], train_tags: Sequence[str], test_words: Sequence[str],
                      test_tags: Sequence[str]) -> float:
    """Held-out accuracy of tagging each word type with its most frequent training tag (unseen types: the most
    frequent tag overall): what a lookup table does without any model."""
    by_type: dict[str, Counter] = {}
    for word, tag in zip(train_words, train_tags):
        by_type.setdefault(word, Counter())[tag] += 1
    overall = Counter(train_tags).most_common(1)[0][0]
    guesses = [by_type[w].most_common(1)[0][0] if w in by_type else overall for w in test_words]
    return float(np.mean([g == t for g, t in zip(guesses, test_tags)])) if test_tags else 0.0
