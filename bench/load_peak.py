"""Loading peak: how much memory ``engine.load`` takes while it loads a model, against the model's fp32 weights.

Writes a bert-large-shaped random ``BertForMaskedLM`` (24 layers, hidden 1024, 16 heads, intermediate 4096,
vocab 30522: 335M parameters, 1.34 GB in fp32) with ``transformers`` to a temporary folder, as fp16 in one
``model.safetensors``, fp16 sharded (``--shard`` MB), fp16 ``pytorch_model.bin`` and fp32 in one file. Each is
then loaded in a fresh subprocess, after ``import torch, engine`` (and transformers' class, for the reference):
the peak resident memory while loading (``VmHWM``, reset through ``/proc/self/clear_refs`` once the imports are
done) minus the resident memory before loading, divided by the model's fp32 weight bytes. The reference in the
same run is ``BertForMaskedLM.from_pretrained(folder, dtype=torch.float32)``. Goal: <= 1.3x for ours. The
folders are deleted at the end.

Usage: python bench/load_peak.py [--layers 24] [--hidden 1024] [--shard 200] [--skip-transformers]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.3
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

# Runs in a fresh interpreter: argv = [kind, folder]; prints one JSON line.
MEASURE = r"""
import json, sys, time
import torch
kind, folder = sys.argv[1], sys.argv[2]
if kind == "engine":
    import engine
    load = lambda: engine.load(folder).model
else:
    from transformers import BertForMaskedLM
    load = lambda: BertForMaskedLM.from_pretrained(folder, dtype=torch.float32)

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

try:
    with open("/proc/self/clear_refs", "w") as handle:   # "5": reset the peak (VmHWM) to the current RSS
        handle.write("5")
    reset = True
except OSError:
    reset = False
before, hwm_before = status("VmRSS"), status("VmHWM")
start = time.perf_counter()
model = load()
seconds = time.perf_counter() - start
after = status("VmRSS")
print(json.dumps({"before": before, "peak": status("VmHWM"), "after": after, "reset": reset,
                  "hwm_before": hwm_before, "seconds": seconds,
                  "parameters": sum(p.numel() for p in model.parameters())}))
"""


def write_folders(root: Path, layers: int, hidden: int, shard_mb: int) -> tuple[dict[str, Path], int]:
    """The model written four ways; returns (label -> folder, fp32 weight bytes)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden)
    torch.manual_seed(0)
    model = BertForMaskedLM(config).eval()
    fp32_bytes = sum(p.numel() for p in model.parameters()) * 4
    folders = {"fp32, one file": root / "fp32"}
    model.save_pretrained(folders["fp32, one file"])
    model = model.half()
    folders["fp16, one file"] = root / "fp16"
    model.save_pretrained(folders["fp16, one file"])
    folders[f"fp16, sharded ({shard_mb} MB)"] = root / "fp16-sharded"
    model.save_pretrained(folders[f"fp16, sharded ({shard_mb} MB)"], max_shard_size=f"{shard_mb}MB")
    folders["fp16, pytorch_model.bin"] = root / "fp16-bin"
    model.save_pretrained(folders["fp16, pytorch_model.bin"], safe_serialization=False)
    return folders, fp32_bytes


def measure(kind: str, folder: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, kind, str(folder)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--shard", type=int, default=200, help="shard size in MB for the sharded folder")
    parser.add_argument("--skip-transformers", action="store_true", help="measure the engine only")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="load-peak-"))
    try:
        start = time.perf_counter()
        folders, fp32_bytes = write_folders(root, args.layers, args.hidden, args.shard)
        print(f"model: {args.layers} layers, hidden {args.hidden}; fp32 weights {fp32_bytes / 1e9:.3f} GB "
              f"(written in {time.perf_counter() - start:.0f} s to {root})")
        print(f"{'folder':32} {'loader':13} {'peak - before':>14} {'ratio':>7} {'held after':>11} {'load s':>7}")
        for label, folder in folders.items():
            for kind in ("engine", *(() if args.skip_transformers else ("transformers",))):
                row = measure(kind, folder)
                if "error" in row:
                    print(f"{label:32} {kind:13} failed: {row['error']}")
                    continue
                peak = row["peak"] - row["before"]
                print(f"{label:32} {kind:13} {peak / 1e9:11.3f} GB {peak / fp32_bytes:6.2f}x "
                      f"{(row['after'] - row['before']) / 1e9:8.3f} GB {row['seconds']:7.1f}"
                      + ("" if row["reset"] else "  (peak not reset after imports)"), flush=True)
        print(f"goal: engine <= {GOAL}x the fp32 weights")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
