"""bench/train_throughput.py: the core function runs on a tiny config and compares like with like."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from support.bench_helpers import load_bench_script
from engine import preset

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "train_throughput.py"
TOP_KEYS = {"torch", "device", "device_name", "precision", "threads", "matmul_reference", "matmul_gflops", "cases",
            "failed", "seconds"}
CASE_KEYS = {"batch", "seq_len", "rounds", "tokens", "t_ours", "t_theirs", "tokens_per_s_ours", "tokens_per_s_theirs",
             "ratio", "paired_ratio", "loss_diff", "dense_flops", "gflops_ours", "gflops_theirs"}


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


@pytest.fixture
def quick_bench(monkeypatch):
    """The bench with its "mini" case shrunk to the tiny preset at B=2, S=16 and a 64^3 matmul reference."""
    bench = load_bench()
    monkeypatch.setitem(bench.CASES, "mini", ("tiny", 2, 16, 3))
    monkeypatch.setitem(bench.MATMUL_SIZES, "cpu", 64)
    return bench


def test_bf16_run_writes_the_json_with_every_key(quick_bench, tmp_path, capsys):
    path = tmp_path / "result.json"
    quick_bench.main(["--cases", "mini", "--same-process", "--precision", "bf16", "--batch-scale", "2",
                      "--json", str(path)])
    assert "bf16 autocast CPU" in capsys.readouterr().out.splitlines()[0]
    data = json.loads(path.read_text(encoding="utf-8"))
    assert set(data) == TOP_KEYS
    assert (data["device"], data["device_name"], data["precision"], data["failed"]) == ("cpu", "cpu", "bf16", {})
    assert data["matmul_reference"] == "fp32 matmul 64^3"  # on CPU the reference stays fp32
    assert data["matmul_gflops"] > 0 and data["seconds"] > 0 and data["threads"] == torch.get_num_threads()
    case = data["cases"]["mini"]
    assert set(case) == CASE_KEYS
    assert (case["batch"], case["seq_len"], case["rounds"], case["tokens"]) == (4, 16, 3, 64)
    for key in CASE_KEYS - {"loss_diff"}:
        assert math.isfinite(case[key]) and case[key] > 0, key
    assert case["loss_diff"] < 1e-5  # the loss check runs in fp32 whatever the precision
    assert case["gflops_ours"] == pytest.approx(case["dense_flops"] / case["t_ours"] / 1e9)
    assert case["ratio"] == pytest.approx(case["t_theirs"] / case["t_ours"])


def test_bf16_step_runs_both_forwards_under_autocast_and_keeps_fp32_weights():
    bench = load_bench()
    config = tiny()
    ours = bench.BertWithHeads(config, heads=("mlm", "nsp")).train()
    theirs = bench.reference_model(ours).train()
    batch = bench.make_batch(config, 2, 16)
    seen = []
    for model, forward in ((ours, bench.forward_ours), (theirs, bench.forward_theirs)):
        model.bert.pooler.dense.register_forward_hook(lambda module, args, output: seen.append(output.dtype))
        loss = bench.train_step_fn(model, forward, batch, precision="bf16")()
        assert math.isfinite(loss)
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert seen == [torch.bfloat16, torch.bfloat16]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_cuda_without_cuda_is_a_usage_error():
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert "CUDA" in done.stderr and "Traceback" not in done.stderr


def test_timed_out_cases_are_reported_as_failed_and_exit_1(quick_bench, tmp_path, capsys):
    path = tmp_path / "result.json"
    with pytest.raises(SystemExit) as exit_info:
        quick_bench.main(["--cases", "mini,base", "--case-timeout-s", "0.01", "--json", str(path)])
    assert exit_info.value.code == 1
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["cases"] == {}
    assert set(data["failed"]) == {"mini", "base"}  # the second case still ran after the first failed
    assert all("timed out" in reason for reason in data["failed"].values())
    assert capsys.readouterr().out.count("FAILED") == 2


def test_subprocess_case_gets_device_precision_batch_scale_and_timeout(monkeypatch):
    bench = load_bench()
    seen = {}
    result = bench.CaseResult(64, 0.1, 0.2, 0.0, 1e9, 2.0)

    def fake_run(command, timeout=None, **kwargs):
        seen.update(command=command, timeout=timeout)
        return SimpleNamespace(stdout=json.dumps(dataclasses.asdict(result)) + "\n")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    args = bench.parse_args(["--precision", "bf16", "--batch-scale", "8", "--threads", "3", "--rounds-scale", "0.5",
                             "--case-timeout-s", "7"])
    assert bench.measure_in_subprocess("base", args) == result
    assert seen["timeout"] == 7.0
    child = bench.parse_args(seen["command"][2:])  # what the child process parses
    assert child.json_case == "base"
    assert (child.device, child.precision, child.batch_scale, child.threads, child.rounds_scale) == \
        ("cpu", "bf16", 8, 3, 0.5)


def test_failure_reason_is_one_line():
    bench = load_bench()
    stderr = "Traceback\n  File x\nRuntimeError: CUDA out of memory\n"
    error = subprocess.CalledProcessError(1, ["python"], stderr=stderr)
    assert bench.failure_reason(error) == "exit status 1: RuntimeError: CUDA out of memory"
    assert bench.failure_reason(subprocess.TimeoutExpired(["python"], 2.5)) == "timed out after 2.5 s"
