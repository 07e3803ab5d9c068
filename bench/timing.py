"""Paired timing for benchmarks: two functions called alternately, order flipped every round.

A shared machine's speed drifts (other processes, frequency changes); alternating call
by call makes any drift slow both sides alike, so their ratio stays meaningful.
"""
from __future__ import annotations

import time
from typing import Callable


def paired_times(ours: Callable[[], object], theirs: Callable[[], object], rounds: int,
                 warmup: int = 3) -> tuple[list[float], list[float]]:
    """Seconds per call of ``ours`` and ``theirs``, one pair per round, timed alternately after warm-up."""
    for _ in range(warmup):
        ours()
        theirs()
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    for index in range(rounds):
        order = (("ours", ours), ("theirs", theirs)) if index % 2 == 0 else (("theirs", theirs), ("ours", ours))
        for name, fn in order:
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times["ours"], times["theirs"]
