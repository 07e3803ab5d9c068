"""bench/train_throughput.py: the core function runs on a tiny config and compares like with like."""
from __future__ import annotations

import math

import torch

from support.bench_helpers import load_bench_script
from engine import preset


def load_bench():
    return load_bench_script("train_throughput")


def tiny():
    return preset("tiny", vocab_size=200, hidden_size=32, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=32)


def test_run_case_gives_finite_positive_numbers_and_matching_losses():
    bench = load_bench()
    result = bench.run_case(tiny(), batch_size=4, seq_len=16, rounds=2, warmup=1)
    for value in (result.t_ours, result.t_theirs, result.tokens_per_s_ours, result.tokens_per_s_theirs,
                  result.ratio, result.dense_flops):
        assert math.isfinite(value) and value > 0
    assert result.tokens == 4 * 16
    assert result.loss_diff < 1e-5


def test_same_weights_same_batch_same_loss_and_masking_rate():
    bench = load_bench()
    config = tiny()
    torch.manual_seed(0)
    ours = bench.BertWithHeads(config, heads=("mlm", "nsp"))
    theirs = bench.reference_model(ours)
    batch = bench.make_batch(config, 8, 32, seed=1)
    chosen = batch["labels"] != -100
    assert 0.05 < chosen.float().mean().item() < 0.3
    assert not chosen[:, 0].any() and not chosen[:, -1].any()  # [CLS] and [SEP] never chosen
    assert bench.loss_difference(ours, theirs, batch) < 1e-5
    assert ours.training and theirs.training  # the check restores training mode (dropout on)


def test_dense_flops_formula():
    bench = load_bench()
    config = preset("mini", vocab_size=30522)
    b, s, h, i, v = 32, 128, 256, 1024, 30522
    forward = 4 * (2 * b * s * (4 * h * h + 2 * h * i) + 4 * b * s * s * h) + 2 * b * s * (h * h + h * v) \
        + 2 * b * (h * h + 2 * h)
    assert bench.dense_step_flops(config, b, s) == 3 * forward
