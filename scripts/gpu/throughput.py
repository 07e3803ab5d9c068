"""The throughput stage: ``bench/train_throughput.py`` on the GPU (ours vs ``transformers.BertForPreTraining``,
bf16 autocast, fused AdamW) for the mini and base cases, its tokens/s ratios, and model FLOP utilisation (MFU):
the dense-equivalent FLOPs of a training step (the bench's count) per second over the card's dense bf16 peak.

The peak is the vendor's datasheet figure for the cards named in ``DENSE_BF16_PEAK_TFLOPS`` (without
sparsity); for another card it is the bf16 matmul rate the bench measures in the same run, and the summary
says which was used.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.gpu.budget import FAILED, PASSED, SKIPPED, StageResult

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "train_throughput.py"
# dense bf16 tensor-core peak in TFLOP/s, without sparsity (vendor datasheets), by a substring of the name
DENSE_BF16_PEAK_TFLOPS = {"H200": 989.4, "H100 SXM": 989.4, "H100 80GB HBM3": 989.4, "H100 PCIe": 756.0,
                          "A100": 312.0, "L4": 121.0}
BATCH_SCALE = 8          # the bench's case batches are sized for 2 CPU cores


def card_peak(name: str) -> float | None:
    """The datasheet's dense bf16 peak (TFLOP/s) of a card, by the longest key found in its name."""
    found = [key for key in DENSE_BF16_PEAK_TFLOPS if key.lower() in name.lower()]
    return DENSE_BF16_PEAK_TFLOPS[max(found, key=len)] if found else None


def mfu(result: dict[str, Any]) -> dict[str, Any]:
    """Per case: tokens/s both sides, the ratio, and each side's dense-equivalent TFLOP/s over the peak."""
    datasheet = card_peak(str(result.get("device_name", "")))
    measured = result.get("matmul_gflops", 0.0) / 1000.0
    peak = datasheet or measured
    cases = {}
    for name, case in result.get("cases", {}).items():
        ours, theirs = case["gflops_ours"] / 1000.0, case["gflops_theirs"] / 1000.0
        cases[name] = {"batch": case.get("batch"), "seq_len": case.get("seq_len"),
                       "tokens_per_s_ours": round(case["tokens_per_s_ours"]),
                       "tokens_per_s_theirs": round(case["tokens_per_s_theirs"]), "ratio": round(case["ratio"], 3),
                       "tflops_ours": round(ours, 1), "tflops_theirs": round(theirs, 1),
                       "mfu_ours": round(ours / peak, 4) if peak else None,
                       "mfu_theirs": round(theirs / peak, 4) if peak else None, "loss_diff": case.get("loss_diff")}
    return {"device_name": result.get("device_name"), "peak_tflops": peak,
            "peak_source": "datasheet" if datasheet else "bf16 matmul measured in the same run",
            "matmul_tflops": round(measured, 1), "cases": cases, "failed": result.get("failed", {})}


def stage(deadline: float, cuda: bool, cases: str = "mini,base") -> StageResult:
    """Run the bench as a subprocess bounded by the deadline; skipped without CUDA."""
    if not cuda:
        return StageResult(SKIPPED, "no CUDA")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "throughput.json"
        left = deadline - time.monotonic()
        command = [sys.executable, str(BENCH), "--device", "cuda", "--precision", "bf16", "--cases", cases,
                   "--batch-scale", str(BATCH_SCALE), "--rounds-scale", "2", "--json", str(out),
                   "--case-timeout-s", str(max(5, int(left / 2) - 5))]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(1.0, left), cwd=ROOT)
        except subprocess.TimeoutExpired:
            return StageResult(FAILED, f"the bench did not finish in {left:.0f} s")
        if not out.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return StageResult(FAILED, f"the bench wrote no results (exit {done.returncode}): {' | '.join(tail)}")
        result = json.loads(out.read_text(encoding="utf-8"))
    summary = mfu(result)
    summary["bench_output"] = done.stdout.strip().splitlines()[-12:]
    line = "; ".join(f"{n}: ours {c['tokens_per_s_ours']:,} tok/s, ratio {c['ratio']:.2f}, MFU ours "
                     f"{c['mfu_ours']:.1%} vs transformers {c['mfu_theirs']:.1%}" for n, c in summary["cases"].items()
                     if c["mfu_ours"] is not None)
    status = PASSED if summary["cases"] and not summary["failed"] else FAILED
    return StageResult(status, line or f"no case finished: {summary['failed']}", summary)
