"""bench/ui_latency.py: the core run on a tiny model with very few requests, and its fallback model."""
from __future__ import annotations

import math
from pathlib import Path

from support.bench_helpers import load_bench_script
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.worker.training_worker import TrainingWorker
from support.probing_helpers import make_services

ENDPOINTS = ["/tokenize", "/fill_mask", "/answer", "/attention", "/embeddings"]
# preset, corpus, max documents, vocab, seq length, batch, lr, steps, mask rate, whole word, nsp
TINY_RUN = ["tiny", "shakespeare", 30, 300, 32, 8, 5e-4, 1_000_000, 0.15, False, True]


def load_bench():
    return load_bench_script("ui_latency")


def test_run_times_every_endpoint_idle_and_during_training(tiny_tokenizer: WordPieceTokenizer,
                                                           tmp_path: Path) -> None:
    bench = load_bench()
    services = make_services(tiny_tokenizer)
    services.worker = TrainingWorker(runs_root=tmp_path)
    try:
        latencies, facts = bench.run(services, requests=2, warmup=1, training=TINY_RUN, max_length=64,
                                     max_seq_len=64, doc_stride=16)
    finally:
        services.worker.close(timeout_s=30)
    http = ["http /noop"] + [f"http {name}" for name in ENDPOINTS]
    assert list(latencies) == http + ENDPOINTS                 # plain HTTP (with the no-op) and gradio_client
    assert set(facts["sizes"]) == {"/noop", *ENDPOINTS} and all(size > 20 for size in facts["sizes"].values())
    assert facts["sizes"]["/attention"] > facts["sizes"]["/noop"]
    for lat in latencies.values():
        assert len(lat.idle) == 2 and len(lat.training) == 2   # 1 before + 1 after the run; 2 during
        assert all(math.isfinite(t) and t > 0 for t in lat.idle + lat.training)
        assert lat.p50("idle") <= lat.p95("idle") and math.isfinite(lat.ratio) and lat.ratio > 0
    assert facts["state_during"] == "running" and facts["startup_s"] > 0 and facts["skipped"] == []
    assert services.worker.status().state in ("stopped", "stopping")  # the bench stopped its run
    lines = bench.report(latencies, facts)
    assert lines[0].startswith("plain HTTP") and "/noop" in lines[1] and "bytes" in lines[1]
    noop_row = next(line for line in lines if line.startswith("/noop "))
    assert noop_row.split()[3] == "1.00"                       # the reference against itself
    assert any(line.startswith("goals: endpoint/noop p50 <= 2 idle") for line in lines)
    assert sum(line.startswith("/tokenize ") for line in lines) == 2   # one row per table
    assert lines[-1].startswith("ratio p50 training/idle: /tokenize ")


def test_missing_model_falls_back_to_a_stand_in_with_a_message(tmp_path: Path, capsys) -> None:
    bench = load_bench()
    services, described = bench.bench_services(tmp_path / "no-model", tmp_path / "runs")
    try:
        assert "stand-in" in described and "no model at" in capsys.readouterr().out
        loaded = services.model("default")
        assert set(loaded.model.heads) == {"mlm", "nsp", "qa"}
        assert loaded.config.num_hidden_layers == 6 and loaded.config.hidden_size == 384
    finally:
        services.get_worker().close(timeout_s=30)


def test_latency_percentiles() -> None:
    bench = load_bench()
    lat = bench.Latency(idle=[0.01 * i for i in range(1, 21)], training=[0.04] * 5)
    assert math.isclose(lat.p50("idle"), 0.105) and math.isclose(lat.p95("idle"), 0.19)
    assert math.isclose(lat.ratio, 0.04 / 0.105)
