"""The throughput stage's arithmetic (scripts/gpu/throughput.py): MFU against the card's datasheet peak, or the
measured bf16 matmul for a card it does not know, and an honest skip without CUDA."""
from __future__ import annotations

import pytest

from scripts.gpu import throughput
from scripts.gpu.budget import SKIPPED

CASE = {"batch": 256, "seq_len": 128, "tokens_per_s_ours": 400_000.0, "tokens_per_s_theirs": 200_000.0,
        "ratio": 2.0, "gflops_ours": 98_940.0, "gflops_theirs": 49_470.0, "loss_diff": 1e-6}


@pytest.mark.parametrize("name, peak", [("NVIDIA H200", 989.4), ("NVIDIA H100 80GB HBM3", 989.4),
                                        ("NVIDIA H100 PCIe", 756.0), ("NVIDIA A100-SXM4-80GB", 312.0),
                                        ("Some Future GPU", None)])
def test_card_peaks(name, peak):
    assert throughput.card_peak(name) == peak


def test_mfu_uses_the_datasheet_peak():
    summary = throughput.mfu({"device_name": "NVIDIA H200", "matmul_gflops": 780_000.0, "cases": {"base": CASE}})
    base = summary["cases"]["base"]
    assert summary["peak_tflops"] == 989.4 and summary["peak_source"] == "datasheet"
    assert base["mfu_ours"] == pytest.approx(0.1, abs=1e-4) and base["mfu_theirs"] == pytest.approx(0.05, abs=1e-4)
    assert base["ratio"] == 2.0 and base["tokens_per_s_ours"] == 400_000


def test_mfu_of_an_unknown_card_uses_the_measured_matmul():
    summary = throughput.mfu({"device_name": "Some Future GPU", "matmul_gflops": 494_700.0, "cases": {"base": CASE}})
    assert summary["peak_source"].startswith("bf16 matmul measured")
    assert summary["cases"]["base"]["mfu_ours"] == pytest.approx(0.2, abs=1e-4)


def test_no_cuda_is_an_honest_skip():
    result = throughput.stage(deadline=0.0, cuda=False)
    assert (result.status, result.detail) == (SKIPPED, "no CUDA")
