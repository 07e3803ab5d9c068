"""bench/cpu_precision.py: both sides run the trainer's own step on the same batch, and the numbers
it reports are finite and say what bf16 costs."""
from __future__ import annotations

import math

import pytest
import torch

from support.bench_helpers import load_bench_script
from engine.model.heads import BertWithHeads
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


def load_bench():
    return load_bench_script("cpu_precision")


def tiny_model(tokenizer, heads=("mlm", "nsp")) -> BertWithHeads:
    torch.manual_seed(0)
    return BertWithHeads(tiny_config(vocab_size=tokenizer.vocab_size), heads=heads)


def test_run_case_times_both_precisions_and_bf16_changes_the_loss_only_a_little(tiny_tokenizer):
    bench = load_bench()
    model = tiny_model(tiny_tokenizer)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = bench.run_case(model, tiny_tokenizer, batch_size=4, seq_len=32, rounds=2, warmup=1)
    for value in (result.t_fp32, result.t_bf16, result.ratio, result.paired_ratio, result.loss_fp32):
        assert math.isfinite(value) and value > 0
    assert result.tokens == 4 * 32
    assert 0 < result.relative_loss_difference < 0.05     # bf16 rounds (not bit-equal), but only a little
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # each side trained a copy


def test_the_two_trainers_differ_only_in_precision(tiny_tokenizer, tmp_path):
    bench = load_bench()
    data = bench.shakespeare_batches(tiny_tokenizer, 4, 32, nsp=True)
    fp32 = bench.make_trainer(tiny_model(tiny_tokenizer), tiny_tokenizer, "fp32", data, tmp_path / "a")
    bf16 = bench.make_trainer(tiny_model(tiny_tokenizer), tiny_tokenizer, "bf16", data, tmp_path / "b")
    assert fp32.autocast_dtype is None and bf16.autocast_dtype == torch.bfloat16
    assert fp32.config.replace(precision="bf16") == bf16.config
    assert torch.equal(fp32.train_data.batch(0, 0).input_ids, bf16.train_data.batch(0, 0).input_ids)


def test_a_model_without_nsp_head_trains_masked_lm_only(tiny_tokenizer, tmp_path):
    bench = load_bench()
    data = bench.shakespeare_batches(tiny_tokenizer, 4, 32, nsp=False)
    trainer = bench.make_trainer(tiny_model(tiny_tokenizer, heads=("mlm",)), tiny_tokenizer, "bf16", data, tmp_path)
    assert not trainer.config.nsp and math.isfinite(bench.batch_loss(trainer))
