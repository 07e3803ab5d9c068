"""Linear CKA between two representations of the same samples, plain and debiased (docs/design/compare.md).

Both read ``x`` (n, p) and ``y`` (n, q): n samples (tokens or words), one row each, as two models (or two layers)
represent them. With the linear kernels ``K = X Xᵀ`` and ``L = Y Yᵀ``, ``CKA = HSIC(K, L) / sqrt(HSIC(K, K)
HSIC(L, L))`` (Kornblith et al., 2019); the two estimators differ in the HSIC they plug in:

* **plain** (the biased estimator): ``HSIC = tr(K H L H)`` with the centring matrix ``H``, which gives
  ``||Yᶜᵀ Xᶜ||²_F / (||Xᶜᵀ Xᶜ||_F ||Yᶜᵀ Yᶜ||_F)`` on column-centred features. With fewer samples than dimensions
  it is biased towards 1: two independent random 8 × 384 matrices score about 0.98.
* **debiased**: the unbiased HSIC estimator of Song et al. (2012), as used by Nguyen, Raghu & Kornblith (2021).
  With ``K̃``, ``L̃`` the Gram matrices with their diagonals set to zero and ``1`` the all-ones vector,
  ``HSIC₁ = [tr(K̃ L̃) + (1ᵀK̃1)(1ᵀL̃1) / ((n − 1)(n − 2)) − 2/(n − 2) · 1ᵀK̃L̃1] / (n(n − 3))``; it needs n ≥ 4.
  Independent representations then score about 0 at any n (scattered by about ±0.2 at 8 samples of 384
  dimensions, ±0.003 at 384). Like the plain one it is invariant to orthogonal transforms, isotropic scaling and
  a shift of every sample.

Everything runs in float64 on the features, never on an n × n Gram matrix unless that is the cheaper way
(:func:`_cross_traces`): ``tr(K L) = ||Yᵀ X||²_F = Σ K ⊙ L``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from engine import cancellation

MIN_DEBIASED_SAMPLES = 4       # the unbiased estimator divides by n(n - 3) and (n - 1)(n - 2)
_CHUNK_ELEMENTS = 4 << 20      # float64 elements of one cross product in feature space (32 MiB)


def few_samples(samples: int, widths: Sequence[int]) -> bool:
    """Whether ``samples`` rows are too few to read a CKA value as a property of the models: fewer than the widest
    representation's dimensions (docs/design/compare.md#how-many-tokens says why this threshold)."""
    return samples < max(widths)


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """The plain (biased) linear CKA of ``x`` (n, p) and ``y`` (n, q), in [0, 1]; 0 when either has no variance
    left after centring (a single sample, or constant vectors). ``ValueError`` when the row counts differ."""
    _check_rows(x, y)
    plain, _ = cka_matrices(x.unsqueeze(0), y.unsqueeze(0), debiased=False)
    return float(plain[0, 0])


def debiased_linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """The debiased linear CKA of ``x`` (n, p) and ``y`` (n, q) (see the module docstring): about 0 for unrelated
    representations, 1 for the same up to rotation, scale and shift; it may be slightly negative. 0 when either
    has no variance; NaN when an unbiased self-similarity comes out ≤ 0 (a handful of nearly equal samples).
    ``ValueError`` when the row counts differ or n < 4."""
    _check_rows(x, y)
    if x.shape[0] < MIN_DEBIASED_SAMPLES:
        raise ValueError(f"debiased CKA needs at least {MIN_DEBIASED_SAMPLES} samples, got {x.shape[0]}")
    _, debiased = cka_matrices(x.unsqueeze(0), y.unsqueeze(0))
    return float(debiased[0, 0])


def cka_matrices(xs: torch.Tensor, ys: torch.Tensor, debiased: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Plain and debiased linear CKA of every layer of ``xs`` (L_a, n, p) against every layer of ``ys`` (L_b, n, q):
    two (L_a, L_b) float64 arrays. The debiased one is NaN throughout when n < 4 (or ``debiased`` is False), and
    where a self-similarity is ≤ 0; both are 0 where a layer has no variance. Checks for cancellation between
    layers of A."""
    if xs.shape[1] != ys.shape[1]:
        raise ValueError(f"CKA needs the same examples on both sides, got {xs.shape[1]} and {ys.shape[1]}")
    n = xs.shape[1]
    xs = xs.double() - xs.double().mean(1, keepdim=True)             # (L_a, n, p), each layer's columns centred
    ys = ys.double() - ys.double().mean(1, keepdim=True)             # (L_b, n, q)
    cross = _cross_traces(xs, ys)                                    # (L_a, L_b): tr(K L) = ||Yᵀ X||²_F
    self_x = torch.stack([_self_trace(x) for x in xs])              # (L_a,): tr(K K)
    self_y = torch.stack([_self_trace(y) for y in ys])              # (L_b,)
    plain = _ratio(cross, self_x.sqrt(), self_y.sqrt())
    unbiased = torch.full_like(cross, float("nan"))
    if debiased and n >= MIN_DEBIASED_SAMPLES:
        rows_x, rows_y = (xs * xs).sum(-1), (ys * ys).sum(-1)        # (L_a, n), (L_b, n): diag(K), diag(L)
        hsic = _unbiased_hsic(cross, rows_x @ rows_y.T, rows_x.sum(1)[:, None], rows_y.sum(1)[None, :], n)
        hsic_x = _unbiased_hsic(self_x, (rows_x * rows_x).sum(1), rows_x.sum(1), rows_x.sum(1), n)    # (L_a,)
        hsic_y = _unbiased_hsic(self_y, (rows_y * rows_y).sum(1), rows_y.sum(1), rows_y.sum(1), n)    # (L_b,)
        unbiased = _ratio(hsic, hsic_x.clamp(min=0).sqrt(), hsic_y.clamp(min=0).sqrt())
        undefined_x = (hsic_x <= 0) & (self_x > 0)                   # (L_a,): varies, yet its HSIC₁ is ≤ 0
        undefined_y = (hsic_y <= 0) & (self_y > 0)                   # (L_b,)
        unbiased[undefined_x[:, None] | undefined_y[None, :]] = float("nan")
    return plain.numpy(), unbiased.numpy()


def _unbiased_hsic(trace_kl: torch.Tensor, diag_dot: torch.Tensor, sum_k: torch.Tensor, sum_l: torch.Tensor,
                   n: int) -> torch.Tensor:
    """HSIC₁ from the traces of centred features (broadcast over layers). With every column centred, ``Xᵀ1 = 0``,
    so ``K1 = 0`` and, with ``d_K = diag(K)``: ``tr(K̃L̃) = tr(KL) − d_K·d_L``, ``1ᵀK̃1 = −Σd_K``, ``K̃1 = −d_K`` and
    ``1ᵀK̃L̃1 = d_K·d_L``. ``sum_k``, ``sum_l`` are ``Σd_K``, ``Σd_L``; ``diag_dot`` is ``d_K·d_L``."""
    trace = trace_kl - diag_dot                                         # tr(K̃ L̃)
    ones = sum_k * sum_l / ((n - 1) * (n - 2))                          # (1ᵀK̃1)(1ᵀL̃1) / ((n-1)(n-2))
    middle = 2.0 / (n - 2) * diag_dot                                   # 2/(n-2) · 1ᵀK̃L̃1
    return (trace + ones - middle) / (n * (n - 3))


def _ratio(top: torch.Tensor, norm_x: torch.Tensor, norm_y: torch.Tensor) -> torch.Tensor:
    """``top[i, j] / (norm_x[i] norm_y[j])``, 0 where a norm is 0 (no variance)."""
    denominator = norm_x[:, None] * norm_y[None, :]                     # (L_a, L_b)
    return torch.where(denominator > 0, top / denominator.where(denominator > 0, torch.ones_like(denominator)),
                       torch.zeros_like(top))


def _self_trace(x: torch.Tensor) -> torch.Tensor:
    """``tr(K K) = ||Xᵀ X||²_F`` of one layer ``x`` (n, p), through the smaller of the two Gram matrices."""
    gram = x @ x.T if x.shape[0] <= x.shape[1] else x.T @ x             # (n, n) or (p, p)
    return (gram * gram).sum()


def _cross_traces(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """``tr(K_i L_j) = ||Y_jᵀ X_i||²_F`` for every pair of layers (L_a, L_b), through the cheaper of the two ways:
    the n × n Gram matrices (n²(P_a + P_b) multiplications, P = the layers' summed widths; only while B's fit in
    32 MiB) or the features (n · P_a · P_b), in chunks of B's layers that keep each product near 32 MiB."""
    layers_a, n, p = xs.shape
    layers_b, _, q = ys.shape
    if n * (layers_a * p + layers_b * q) < layers_a * p * layers_b * q and layers_b * n * n <= _CHUNK_ELEMENTS:
        grams_b = (ys @ ys.transpose(1, 2)).reshape(layers_b, n * n)    # (L_b, n, n) -> (L_b, n²)
        rows = []
        for x in xs:
            cancellation.check()
            rows.append(grams_b @ (x @ x.T).reshape(n * n))            # (n, n) -> (n²,); (L_b,)
        return torch.stack(rows)
    per_chunk = max(1, _CHUNK_ELEMENTS // (p * q))
    rows = []
    for x in xs:                                                        # (n, p)
        cancellation.check()
        row = []
        for start in range(0, layers_b, per_chunk):
            chunk = ys[start:start + per_chunk]                         # (c, n, q)
            flat = chunk.transpose(0, 1).reshape(n, -1)                 # (n, c, q) -> (n, c·q)
            product = (x.T @ flat).reshape(p, chunk.shape[0], q)        # (p, c·q) -> (p, c, q)
            row.append((product * product).sum((0, 2)))                 # (c,)
        rows.append(torch.cat(row))
    return torch.stack(rows)


def _check_rows(x: torch.Tensor, y: torch.Tensor) -> None:
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"CKA takes two (samples, features) matrices, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"CKA needs the same examples on both sides, got {x.shape[0]} and {y.shape[0]}")


class LayerGrid:
    """What a result holding ``cka`` (L_a + 1, L_b + 1), hidden state i of A against hidden state j of B, reads
    off it: the layers matched by relative depth, and the diagonal when the depths are equal."""

    cka: np.ndarray

    @property
    def layer_pairs(self) -> list[tuple[int, int]]:
        """``(i, j)`` for every hidden state i of A: B's at the same relative depth, ``j = round(i * L_b / L_a)``
        rounded half up (layer 0, the embeddings' output, with layer 0; the last with the last)."""
        layers_a, layers_b = self.cka.shape[0] - 1, self.cka.shape[1] - 1
        return [(i, (2 * i * layers_b + layers_a) // (2 * layers_a) if layers_a else 0) for i in range(layers_a + 1)]

    def matched(self, values: np.ndarray) -> np.ndarray:
        """``values`` (L_a + 1, L_b + 1) at each pair of ``layer_pairs``: (L_a + 1,)."""
        return np.array([values[i, j] for i, j in self.layer_pairs])

    @property
    def matched_cka(self) -> np.ndarray:
        """CKA of each pair in ``layer_pairs``, (L_a + 1,): the diagonal when the depths are equal."""
        return self.matched(self.cka)

    @property
    def same_depth_cka(self) -> np.ndarray | None:
        """CKA of layer i of A against layer i of B (None when the depths differ)."""
        rows, cols = self.cka.shape
        return np.diag(self.cka).copy() if rows == cols else None
