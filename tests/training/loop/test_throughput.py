"""The tokens/s a user reads: tokens over training time in a window, so one odd step does not make it jump."""
from __future__ import annotations

import pytest

from engine.training.loop.throughput import Throughput


def records(durations: list[float], tokens: list[int], start: float = 0.0) -> list[dict]:
    out, elapsed = [], start
    for step, (d, n) in enumerate(zip(durations, tokens), start=1):
        elapsed += d
        out.append({"step": step, "tokens_per_s": n / d, "elapsed": elapsed})
    return out


def test_rate_is_tokens_over_seconds_in_the_window_not_the_last_step():
    meter = Throughput(window_s=10.0)
    assert meter.tokens_per_s is None
    # nine ordinary steps of 1,000 tokens in 1 s, then one slow step (the machine was busy): 1,000 in 4 s
    for record in records([1.0] * 9 + [4.0], [1000] * 10):
        meter.add(record)
    # the last step alone says 250 tokens/s; the last 10 s of training (elapsed 3..13: steps 4..10, 7,000
    # tokens) say 700
    assert meter.tokens_per_s == pytest.approx(7000 / 10.0, rel=1e-9)


def test_old_steps_leave_the_window():
    meter = Throughput(window_s=5.0)
    for record in records([1.0] * 10, [100] * 5 + [500] * 5):
        meter.add(record)
    assert meter.tokens_per_s == pytest.approx(500.0)          # only the last 5 s count


def test_a_single_record_reads_its_own_rate_and_records_without_a_rate_are_ignored():
    meter = Throughput()
    meter.add({"step": 1, "elapsed": 3.0})
    assert meter.tokens_per_s is None
    meter.add({"step": 1, "tokens_per_s": 1234.0, "elapsed": 30.0})    # e.g. the first step of a resumed run
    assert meter.tokens_per_s == pytest.approx(1234.0)
