"""bench/neighbours.py: the timed search is the engine's (same neighbours as a numpy brute force), and the
faiss comparison, when faiss is there, is checked to find the same neighbours before it is timed."""
from __future__ import annotations

import numpy as np
import torch

from support.bench_helpers import load_bench_script


def test_the_timed_search_is_an_exact_cosine_top_k() -> None:
    bench = load_bench_script("neighbours")
    vectors, query = bench.unit_vectors(500), bench.unit_vectors(1, seed=1)[0]
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(500))
    expected = np.argsort(-(vectors.numpy() @ query.numpy()), kind="stable")[:bench.K].tolist()
    assert bench.torch_search(vectors, query) == expected


def test_a_search_case_reports_milliseconds() -> None:
    bench = load_bench_script("neighbours")
    case = bench.search_case(1000, rounds=3)
    assert case["n"] == 1000 and case["torch_ms"] > 0
    assert case["faiss_ms"] is None or case["faiss_ms"] > 0
