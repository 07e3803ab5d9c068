"""bench/config_while_training.py: its summary counts timeouts apart and compares medians."""
from __future__ import annotations

from support.bench_helpers import load_bench_script


def test_the_summary_counts_timeouts_and_gives_the_ratio_of_medians() -> None:
    bench = load_bench_script("config_while_training")
    line = bench._summary("/config", [0.1, 0.2, 0.3], [0.2, None, 0.4, 0.6])
    assert "idle p50 0.20 s" in line and "(0 timeouts of 3)" in line
    assert "run starting p50 0.40 s" in line and "max 0.60 s (1 timeouts of 4)" in line
    assert line.endswith("p50 ratio 2.0x")
