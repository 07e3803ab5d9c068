"""Linear CKA, plain and debiased (engine/probes/comparison/cka.py), against their definitions written out here on
the Gram matrices: the plain one as tr(KHLH), the debiased one as the unbiased HSIC estimator of Song et al. (2012)
(Nguyen, Raghu & Kornblith, 2021). Both are 1 for a representation against itself and against an orthogonal
rotation, scaling and shift of it; on 8 samples of 384 dimensions the plain one calls two independent random
matrices alike, the debiased one does not."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from engine.probes.comparison.cka import (MIN_DEBIASED_SAMPLES, cka_matrices, debiased_linear_cka, few_samples,
                                          linear_cka)


def gram_hsic_unbiased(k: np.ndarray, l_: np.ndarray) -> float:
    """HSIC₁ from its definition: K̃, L̃ with zeroed diagonals, [tr(K̃L̃) + 1ᵀK̃1 1ᵀL̃1 / ((n-1)(n-2))
    - 2/(n-2) 1ᵀK̃L̃1] / (n(n-3))."""
    n = k.shape[0]
    k, l_ = k.copy(), l_.copy()
    np.fill_diagonal(k, 0.0)
    np.fill_diagonal(l_, 0.0)
    ones = np.ones(n)
    return float((np.trace(k @ l_) + (ones @ k @ ones) * (ones @ l_ @ ones) / ((n - 1) * (n - 2))
                  - 2.0 / (n - 2) * (ones @ k @ l_ @ ones)) / (n * (n - 3)))


def reference_debiased(x: np.ndarray, y: np.ndarray) -> float:
    """Debiased linear CKA on the raw (uncentred) features: HSIC₁(K, L) / sqrt(HSIC₁(K, K) HSIC₁(L, L))."""
    k, l_ = x @ x.T, y @ y.T
    return gram_hsic_unbiased(k, l_) / math.sqrt(gram_hsic_unbiased(k, k) * gram_hsic_unbiased(l_, l_))


def reference_plain(x: np.ndarray, y: np.ndarray) -> float:
    """Plain linear CKA: tr(KHLH) / sqrt(tr(KHKH) tr(LHLH)), H the centring matrix."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l_ = x @ x.T, y @ y.T
    return float(np.trace(k @ h @ l_ @ h) / math.sqrt(np.trace(k @ h @ k @ h) * np.trace(l_ @ h @ l_ @ h)))


def t(array: np.ndarray) -> torch.Tensor:
    return torch.tensor(array)


@pytest.mark.parametrize("n,p,q", [(8, 384, 384), (12, 5, 7), (50, 10, 300), (300, 6, 9)])
def test_both_estimators_equal_their_gram_matrix_definitions(n, p, q) -> None:
    """Related representations (y shares x's first columns), at fewer and at more samples than dimensions: both
    ways the engine computes (n × n Gram matrices or the features) give the definitions' numbers."""
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, p)) + 2.0
    y = rng.normal(size=(n, q))
    shared = min(p, q)
    y[:, :shared] += 0.8 * x[:, :shared]
    assert debiased_linear_cka(t(x), t(y)) == pytest.approx(reference_debiased(x, y), rel=1e-9, abs=1e-12)
    assert linear_cka(t(x), t(y)) == pytest.approx(reference_plain(x, y), rel=1e-9)


def test_every_layer_pair_equals_the_pairwise_values() -> None:
    rng = np.random.default_rng(1)
    for n in (6, 40, 500):                          # small n: Gram matrices; large n: features, in chunks
        xs, ys = rng.normal(size=(3, n, 16)), rng.normal(size=(4, n, 9))
        ys[:, :, :9] += 0.5 * xs[1, :, :9]
        plain, debiased = cka_matrices(t(xs), t(ys))
        assert plain.shape == debiased.shape == (3, 4)
        expected = [[reference_debiased(x, y) for y in ys] for x in xs]
        np.testing.assert_allclose(debiased, expected, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(plain, [[reference_plain(x, y) for y in ys] for x in xs], rtol=1e-9)


def test_itself_and_an_orthogonal_rotation_of_itself_are_one() -> None:
    """Invariance to orthogonal transforms, isotropic scaling and a shift of every sample, for both estimators."""
    rng = np.random.default_rng(2)
    for n in (8, 600):
        x = rng.normal(size=(n, 48))
        q, _ = np.linalg.qr(rng.normal(size=(48, 48)))                           # an orthogonal matrix
        moved = 3.0 * x @ q + rng.normal(size=48)
        for estimator in (linear_cka, debiased_linear_cka):
            assert estimator(t(x), t(x)) == pytest.approx(1.0, abs=1e-12)
            assert estimator(t(x), t(moved)) == pytest.approx(1.0, abs=1e-9)


def test_the_plain_estimator_is_biased_on_few_tokens_and_the_debiased_one_is_not() -> None:
    """Two independent random representations of 8 tokens in 384 dimensions (one input against the default model's
    width): the plain estimator calls them alike, the debiased one scatters around 0. At 1,000 tokens both fall."""
    rng = np.random.default_rng(3)
    pairs = [(rng.normal(size=(8, 384)), rng.normal(size=(8, 384))) for _ in range(20)]
    plain = [linear_cka(t(x), t(y)) for x, y in pairs]
    debiased = [debiased_linear_cka(t(x), t(y)) for x, y in pairs]
    assert min(plain) > 0.95                                        # measured 0.979 ± 0.006 over 50 draws
    assert abs(np.mean(debiased)) < 0.15 and max(map(abs, debiased)) < 0.7     # measured −0.03 ± 0.20
    x, y = rng.normal(size=(1000, 384)), rng.normal(size=(1000, 384))
    assert linear_cka(t(x), t(y)) < 0.35 and abs(debiased_linear_cka(t(x), t(y))) < 0.01   # 0.277; 0 ± 0.001


def test_edge_cases_and_refusals() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(12, 8))
    assert linear_cka(t(x), torch.ones(12, 4)) == 0.0 and debiased_linear_cka(t(x), torch.ones(12, 4)) == 0.0
    with pytest.raises(ValueError, match="same examples"):
        debiased_linear_cka(t(x), t(x[:5]))
    with pytest.raises(ValueError, match="at least 4 samples"):
        debiased_linear_cka(t(x[:3]), t(x[:3]))
    plain, debiased = cka_matrices(t(x[None, :3]), t(x[None, :3]))              # 3 samples: plain only
    assert plain[0, 0] == pytest.approx(1.0) and np.isnan(debiased).all()
    assert MIN_DEBIASED_SAMPLES == 4
    assert few_samples(8, (384, 384)) and few_samples(383, (32, 384)) and not few_samples(384, (384, 256))
