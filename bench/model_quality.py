"""Held-out quality of a model, measured through the same functions the UI calls.

Masked-token accuracy: held-out Wikipedia paragraphs (never trained on), each cut to the
model's window; 15% of the non-special tokens (at least one) chosen with a fixed seed are
replaced by ``[MASK]`` in the text, and ``engine.probes.inference.fill_mask`` must put the original
token first (top-1) or in its top 5.

SQuAD v1.1: exact match and F1 (official normalisation, ``engine.probes.heads.squad_metric``) of
``engine.probes.inference.answer`` on held-out SQuAD articles (a seeded sample of questions, or all).

The held-out files come from ``scripts/prepare_default_model_data.py`` (not part of the repo):

    python scripts/prepare_default_model_data.py --data ../shared/data --out ../build/data
    python bench/model_quality.py --model default --data ../build/data
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.probes.heads import squad_metric  # noqa: E402
from engine.checkpoints.hf_format import load  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.probes.inference import answer, fill_mask  # noqa: E402

MASK = "[MASK]"


def wiki_paragraphs(path: Path) -> list[str]:
    """Paragraphs (one per line of each article) of a ``{"text": ...}`` JSONL file, in file order."""
    paragraphs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            paragraphs += [p for p in json.loads(line)["text"].split("\n") if p.strip()]
    return paragraphs


def masked_example(loaded: LoadedModel, paragraph: str, rng: np.random.Generator, rate: float,
                   max_tokens: int) -> tuple[str, list[int]] | None:
    """(text with ``[MASK]`` in place of ~``rate`` of its tokens, the original ids in order), or None
    when the masked text does not re-tokenize to the same positions (so scoring would be unfair)."""
    tokenizer = loaded.tokenizer
    enc = tokenizer.encode(paragraph, max_length=max_tokens)
    real = [i for i, s in enumerate(enc.special_tokens_mask) if not s]
    if len(real) < 8:
        return None
    text = paragraph[:enc.offsets[real[-1]][1]]
    chosen = sorted(rng.choice(real, size=max(1, round(rate * len(real))), replace=False).tolist())
    masked = text
    for position in reversed(chosen):
        start, end = enc.offsets[position]
        masked = masked[:start] + MASK + masked[end:]
    check = tokenizer.encode(masked, max_length=max_tokens)
    mask_id = tokenizer.token_to_id(MASK)
    if len(check.input_ids) != len(real) + 2 or [i for i, t in enumerate(check.input_ids) if t == mask_id] != chosen:
        return None
    return masked, [enc.input_ids[p] for p in chosen]


def masked_token_accuracy(loaded: LoadedModel, paragraphs: list[str], num_tokens: int, seed: int,
                          rate: float = 0.15, max_tokens: int = 128) -> dict[str, Any]:
    """Top-1 / top-5 accuracy over about ``num_tokens`` masked tokens."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(paragraphs))
    top1 = top5 = total = skipped = 0
    for index in order:
        example = masked_example(loaded, paragraphs[index], rng, rate, max_tokens)
        if example is None:
            skipped += 1
            continue
        text, targets = example
        results = fill_mask(loaded, text, top_k=5)
        per_mask = results if len(targets) > 1 else [results]
        for target, candidates in zip(targets, per_mask):
            ids = [c["token"] for c in candidates]
            top1 += ids[0] == target
            top5 += target in ids
            total += 1
        if total >= num_tokens:
            break
    return {"masked_tokens": total, "top1": top1 / max(total, 1), "top5": top5 / max(total, 1),
            "paragraphs_skipped": skipped}


def squad_questions(path: Path, num_questions: int, seed: int) -> list[dict[str, Any]]:
    """``{"id", "question", "context", "answers"}`` for a seeded sample (or all, when 0)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    items = [{"id": qa["id"], "question": qa["question"], "context": paragraph["context"],
              "answers": [a["text"] for a in qa["answers"]]}
             for article in data["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    if 0 < num_questions < len(items):
        keep = sorted(np.random.default_rng(seed).choice(len(items), size=num_questions, replace=False).tolist())
        items = [items[i] for i in keep]
    return items


def squad_scores(loaded: LoadedModel, items: list[dict[str, Any]], max_answer_len: int) -> dict[str, Any]:
    """SQuAD v1.1 exact match and F1 (x 100) of ``engine.probes.inference.answer``."""
    predictions = {item["id"]: answer(loaded, item["question"], item["context"], max_answer_len=max_answer_len)["answer"]
                   for item in items}
    scores = squad_metric.evaluate(predictions, [(item["id"], item["answers"]) for item in items])
    return {"questions": len(items), **scores}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Held-out masked-token accuracy and SQuAD EM/F1 of a model.")
    parser.add_argument("--model", default="default", help="'default', a model folder or checkpoint")
    parser.add_argument("--data", default="../build/data", help="folder with wiki_heldout.jsonl and squad_heldout.json")
    parser.add_argument("--mlm-tokens", type=int, default=5000, help="masked tokens to score (default 5000)")
    parser.add_argument("--squad-questions", type=int, default=2000, help="held-out questions to answer, 0 all")
    parser.add_argument("--max-answer-len", type=int, default=30, help="longest answer in tokens (run_qa's 30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = Path(args.data)
    wiki, squad = data / "wiki_heldout.jsonl", data / "squad_heldout.json"
    for path in (wiki, squad):
        if not path.is_file():
            parser.error(f"{path} is missing; make it with scripts/prepare_default_model_data.py")
    loaded = load(args.model)
    results: dict[str, Any] = {"model": loaded.source, "heads": list(loaded.heads)}
    print(f"model {loaded.source}: heads {', '.join(loaded.heads)}")
    if "mlm" in loaded.heads:
        start = time.perf_counter()
        mlm = masked_token_accuracy(loaded, wiki_paragraphs(wiki), args.mlm_tokens, args.seed)
        mlm["seconds"] = round(time.perf_counter() - start, 1)
        results["masked_lm"] = mlm
        print(f"masked-token accuracy on held-out Wikipedia ({mlm['masked_tokens']} tokens, 15% masking, "
              f"seed {args.seed}): top-1 {mlm['top1']:.1%}, top-5 {mlm['top5']:.1%}  [{mlm['seconds']} s]")
    if "qa" in loaded.heads:
        start = time.perf_counter()
        qa = squad_scores(loaded, squad_questions(squad, args.squad_questions, args.seed), args.max_answer_len)
        qa["seconds"] = round(time.perf_counter() - start, 1)
        results["squad"] = qa
        print(f"SQuAD v1.1 held-out ({qa['questions']} questions): exact match {qa['exact_match']:.1f}, "
              f"F1 {qa['f1']:.1f}  [{qa['seconds']} s]")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
