"""Nearest contextual neighbours: is an exact torch matmul + top-k as fast as faiss at our sizes?

1. Search: one query against N unit vectors of 384 floats (the default model's width), k = 10, for
   N = 10k, 50k, 100k (a 5,000-sentence index holds about 60-100k word pieces). ``engine.probes.representations.neighbours``'
   search (``vectors @ query`` and ``topk``) against faiss' exact inner-product index (``IndexFlatIP``),
   timed alternately in one process (``bench.timing.paired_times``); prints the medians and the ratio
   torch/faiss. Both return the same neighbours (checked). Without faiss installed it says so and times
   torch alone (faiss is not a dependency of the app; ``pip install faiss-cpu==1.15.1`` to compare).
2. Building: the index of the first ``--sentences`` sentences of the built-in corpus on the bundled model
   at layer 4, in sentences/s and word pieces/s.

Usage: python bench/neighbours.py [--threads 2] [--sentences 500] [--rounds 200]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.timing import paired_times  # noqa: E402

SIZES = (10_000, 50_000, 100_000)
WIDTH, K = 384, 10


def torch_search(vectors: torch.Tensor, query: torch.Tensor, k: int = K) -> list[int]:
    """The search of ``engine.probes.representations.neighbours.nearest``: exact cosine top-k of unit vectors."""
    return (vectors @ query).topk(k).indices.tolist()


def faiss_index(vectors: torch.Tensor):
    """faiss' exact inner-product index over the same vectors, or None when faiss is not installed."""
    try:
        import faiss
    except ImportError:
        return None
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors.numpy())
    return index


def unit_vectors(n: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, WIDTH, generator=generator), dim=-1)   # (N, H)


def search_case(n: int, rounds: int) -> dict[str, float | None]:
    vectors, query = unit_vectors(n), unit_vectors(1, seed=1)[0]
    index = faiss_index(vectors)
    ours = torch_search(vectors, query)
    if index is None:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            torch_search(vectors, query)
            samples.append(time.perf_counter() - start)
        return {"n": n, "torch_ms": 1e3 * statistics.median(samples), "faiss_ms": None}
    _, found = index.search(query.numpy()[None, :], K)
    assert found[0].tolist() == ours, "faiss and torch disagree on the neighbours"
    times_torch, times_faiss = paired_times(lambda: torch_search(vectors, query),
                                            lambda: index.search(query.numpy()[None, :], K), rounds)
    return {"n": n, "torch_ms": 1e3 * statistics.median(times_torch), "faiss_ms": 1e3 * statistics.median(times_faiss)}


def build_case(sentences: int) -> dict[str, float]:
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load_directory
    from engine.probes.representations.neighbours import build_index
    from engine.text.builtin_corpus import builtin_corpus

    chosen: list[str] = []
    for document in builtin_corpus("shakespeare"):
        chosen.extend(document)
        if len(chosen) >= sentences:
            break
    loaded = load_directory(DEFAULT_MODEL_DIR)
    loaded.model.eval()
    start = time.perf_counter()
    index = build_index(loaded, chosen[:sentences], 4)
    seconds = time.perf_counter() - start
    return {"sentences": sentences, "pieces": len(index), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=500, help="sentences to index (0: skip the build)")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ratios = []
    for n in SIZES:
        case = search_case(n, args.rounds)
        if case["faiss_ms"] is None:
            print(f"N={n:>7,}: torch {case['torch_ms']:.3f} ms (faiss not installed)")
        else:
            ratio = case["torch_ms"] / case["faiss_ms"]
            ratios.append(f"N={n:,}: {ratio:.2f}")
            print(f"N={n:>7,}: torch {case['torch_ms']:.3f} ms, faiss IndexFlatIP {case['faiss_ms']:.3f} ms, "
                  f"torch/faiss {ratio:.2f}")
    if args.sentences:
        built = build_case(args.sentences)
        print(f"build: {built['sentences']:,} sentences, {built['pieces']:,} word pieces in {built['seconds']:.1f} s "
              f"({built['sentences'] / built['seconds']:.0f} sentences/s, {built['pieces'] / built['seconds']:.0f} "
              f"pieces/s)")
    if ratios:
        print("ratios torch/faiss (1.00 = as fast):", "; ".join(ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
