"""Join the model a GPU session sent back, check it, and measure it beside the shipped one (docs/design/gpu-session.md).

    python scripts/gpu_assemble.py --parts /work/.device/<call>/  # the folder the device call's files landed in

Checks every part and the joined archive against ``manifest.json`` (sizes and SHA-256), writes the model folder
(default ``../build/gpu-model``), then measures it and the shipped ``assets/default-model`` in the same run with
``bench/model_quality.py``'s functions on the model card's held-out split (``../build/data``, made by
``scripts/prepare_default_model_data.py``): masked-token top-1 / top-5 and SQuAD v1.1 EM / F1. It says whether
the new model is better on both masked-token top-1 and SQuAD F1, the rule for shipping it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.model_quality import masked_token_accuracy, squad_questions, squad_scores, wiki_paragraphs  # noqa: E402
from engine.checkpoints.hf_format import load  # noqa: E402
from scripts.gpu.parts import join_parts  # noqa: E402


def measure(model: str | Path, data: Path, mlm_tokens: int, questions: int, seed: int) -> dict[str, Any]:
    """The card's two measures of one model (top-1/top-5 as fractions, EM/F1 x 100)."""
    loaded = load(str(model))
    started = time.perf_counter()
    mlm = masked_token_accuracy(loaded, wiki_paragraphs(data / "wiki_heldout.jsonl"), mlm_tokens, seed)
    qa = squad_scores(loaded, squad_questions(data / "squad_heldout.json", questions, seed), 30)
    return {"model": str(model), "top1": mlm["top1"], "top5": mlm["top5"], "masked_tokens": mlm["masked_tokens"],
            "exact_match": qa["exact_match"], "f1": qa["f1"], "questions": qa["questions"],
            "seconds": round(time.perf_counter() - started, 1)}


def verdict(new: dict[str, Any], shipped: dict[str, Any]) -> bool:
    """Ship only a model better on both measures."""
    return new["top1"] > shipped["top1"] and new["f1"] > shipped["f1"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=Path, required=True, help="the folder holding manifest.json and the parts")
    parser.add_argument("--out", type=Path, default=ROOT.parent / "build" / "gpu-model", help="the model folder to write")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "build" / "data",
                        help="wiki_heldout.jsonl and squad_heldout.json (scripts/prepare_default_model_data.py)")
    parser.add_argument("--shipped", default=str(ROOT / "assets" / "default-model"), help="the model to compare with")
    parser.add_argument("--mlm-tokens", type=int, default=5000, help="masked tokens to score (the card's 5000)")
    parser.add_argument("--squad-questions", type=int, default=2000, help="held-out questions (the card's 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the comparison here")
    args = parser.parse_args(argv)
    for name in ("wiki_heldout.jsonl", "squad_heldout.json"):
        if not (args.data / name).is_file():
            parser.error(f"{args.data / name} is missing; make it with scripts/prepare_default_model_data.py")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        manifest = join_parts(args.parts, args.out)
    except (ValueError, OSError) as exc:
        print(f"the parts in {args.parts} cannot be joined: {exc}", file=sys.stderr)
        return 2
    print(f"joined {len(manifest['parts'])} parts ({manifest['archive']['bytes']:,} bytes, SHA-256 checked) into "
          f"{args.out}: {', '.join(f['name'] for f in manifest['files'])}")
    results = {}
    for label, model in (("new", args.out), ("shipped", args.shipped)):
        results[label] = measure(model, args.data, args.mlm_tokens, args.squad_questions, args.seed)
        r = results[label]
        print(f"{label:8s} masked-token top-1 {r['top1']:.1%} top-5 {r['top5']:.1%} ({r['masked_tokens']} tokens) | "
              f"SQuAD EM {r['exact_match']:.1f} F1 {r['f1']:.1f} ({r['questions']} questions)  [{r['seconds']} s]")
    better = verdict(results["new"], results["shipped"])
    results["better_on_both"] = better
    print(f"difference: top-1 {100 * (results['new']['top1'] - results['shipped']['top1']):+.1f} points, "
          f"F1 {results['new']['f1'] - results['shipped']['f1']:+.1f}")
    print("ship it: better on both measures" if better else "do not ship: not better on both measures")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
