"""bench/inference.py: the reference model carries our weights, and the --qkv comparison compares
the fused Q/K/V projection with three GEMMs on the same weights."""
from __future__ import annotations

import torch

from support.bench_helpers import load_bench_script
from engine import BertModel, preset


def tiny() -> BertModel:
    torch.manual_seed(0)
    config = preset("tiny", vocab_size=200, hidden_size=32, num_attention_heads=4, intermediate_size=37,
                    max_position_embeddings=32)
    return BertModel(config).eval()


def test_reference_model_gives_our_outputs():
    bench = load_bench_script("inference")
    ours = tiny()
    theirs = bench.reference_model(ours)
    ids = torch.randint(5, 200, (2, 9))
    with torch.inference_mode():
        diff = (ours(ids).last_hidden_state - theirs(input_ids=ids).last_hidden_state).abs().max()
    assert diff <= 1e-5


def test_three_gemm_copy_has_the_same_weights_and_no_fused_copy():
    bench = load_bench_script("inference")
    fused = tiny()
    three = bench.three_gemm_copy(fused)
    ids = torch.randint(5, 200, (2, 9))
    with torch.inference_mode():
        a, b = fused(ids).last_hidden_state, three(ids).last_hidden_state
    assert (a - b).abs().max() <= 1e-5
    assert all(layer.attention.self.inference_cache.fused_weight is not None for layer in fused.encoder.layer)
    assert all(layer.attention.self.inference_cache.fused_weight is None for layer in three.encoder.layer)
