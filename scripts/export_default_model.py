"""Export a training checkpoint as the bundled default model: HF layout, fp16 safetensors.

    python scripts/export_default_model.py --model ../build/runs/final/checkpoints/step-000300 \
        --out assets/default-model

The checkpoint's optimizer/RNG state is left behind; the weights are stored in float16 (the
app loads them as float32) so the model fits the 50 MB budget for files in git; config.json says
``"dtype": "float32"`` so that transformers (whose default is ``dtype="auto"``) computes in float32 too and
gives the app's numbers. Every head
the checkpoint has (MLM, NSP, QA) is kept.
The model card (README.md in the output folder) is written by hand and kept when present.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.checkpoints.hf_format import load_directory, save  # noqa: E402

KEPT_FILES = ("README.md",)


def to_half(weights: Path) -> None:
    """Rewrite a safetensors file with every floating tensor in float16."""
    tensors = load_file(str(weights))
    halved = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(halved, str(weights), metadata={"format": "pt"})
    weights.chmod(0o644)  # an ordinary file of the repository


def compute_in_fp32(config_path: Path) -> None:
    """Add ``"dtype": "float32"`` to config.json: transformers' default ``dtype="auto"`` reads it (else it
    would compute in the weights' float16)."""
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["dtype"] = "float32"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, merge heads, write the folder, report its size."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="the checkpoint to ship")
    parser.add_argument("--out", type=Path, default=Path("assets/default-model"))
    args = parser.parse_args(argv)

    loaded = load_directory(args.model)
    model = loaded.model
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "model"
        save(model, loaded.tokenizer, staging)
        to_half(staging / "model.safetensors")
        compute_in_fp32(staging / "config.json")
        for name in KEPT_FILES:
            if (args.out / name).exists():
                shutil.copy2(args.out / name, staging / name)
        if args.out.exists():
            shutil.rmtree(args.out)
        shutil.copytree(staging, args.out)
    size = sum(f.stat().st_size for f in args.out.iterdir())
    print(f"wrote {args.out}: heads {', '.join(model.heads)}, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
