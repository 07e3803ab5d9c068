"""Fine-tuning quality: the bundled default model fine-tuned on each task's real or built-in data,
measured on held-out data it never trained on, through the same job path as the app and the CLI
(``JobSpec`` -> ``prepare_job`` -> ``Trainer``).

- ``pos``: UD English EWT part-of-speech tags (``../shared/data/ud-english-ewt/en_ewt-ud-dev.conllu``,
  CC BY-SA 4.0). The dev file's documents are split in order: the last quarter is held out, the rest
  trained on (the first 20 documents, the bundled ``assets/examples/pos-ewt-sample.tsv``, are in the
  training part, never in the held-out one). Goal: held-out accuracy >= 90% within 15 minutes of 2-core CPU.
- ``next-choice``: "which of 4 sentences comes next?" built from Wikipedia documents; the job holds
  out whole documents. Goal: held-out accuracy >= 70% (chance 25%).
- ``sentiment``: the bundled ``assets/examples/sentiment.csv`` with a fifth held out.

Each prints the held-out figures at each evaluation and at the end, and the wall time. Not a test.

    python bench/finetune_quality.py pos --minutes 15
    python bench/finetune_quality.py next-choice --minutes 15
    python bench/finetune_quality.py sentiment
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.training.loop.callbacks import FunctionCallback  # noqa: E402
from engine.training.tasks.job_spec import JobSpec  # noqa: E402
from engine.training.jobs.setup import prepare_job  # noqa: E402
from engine.training.tasks.finetuning import CLASSIFICATION  # noqa: E402
from engine.training.tasks.multiple_choice import MULTIPLE_CHOICE  # noqa: E402
from engine.training.tasks.token_classification import TOKEN_CLASSIFICATION  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
EWT_DEV = SHARED / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
WIKI = SHARED / "enwiki-2015-wikiextractor"


def split_conllu_documents(path: Path, held_out: float) -> tuple[str, str, int, int]:
    """The CoNLL-U text cut at ``# newdoc`` lines: (training part, held-out part, their document counts)."""
    text = path.read_text(encoding="utf-8")
    documents = [d for d in re.split(r"(?m)^(?=# newdoc)", text) if d.strip()]
    cut = int(round(len(documents) * (1 - held_out)))
    return "".join(documents[:cut]), "".join(documents[cut:]), cut, len(documents) - cut


def wiki_documents(root: Path, limit: int) -> list[list[str]]:
    """Up to ``limit`` Wikipedia articles (wikiextractor's ``<doc ...>`` files) as documents of sentences
    (paragraph lines split at ". "; sentences of fewer than 5 words dropped; at most 40 per article)."""
    documents: list[list[str]] = []
    for path in sorted(root.rglob("wiki_*")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for body in re.findall(r"<doc [^>]*>\n(.*?)</doc>", text, flags=re.S):
            lines = body.strip().split("\n")[1:]                     # the first line is the title
            sentences = [s.strip().rstrip(".") + "." for line in lines for s in line.split(". ")
                         if len(s.split()) >= 5]
            if len(sentences) >= 4:
                documents.append(sentences[:40])
            if len(documents) >= limit:
                return documents
    return documents


def run(spec: JobSpec, minutes: float, label: str) -> dict[str, Any]:
    """Train ``spec`` until its steps or ``minutes`` run out; print every evaluation; the last one's metrics."""
    start = time.monotonic()
    evaluations: list[dict[str, Any]] = []

    def log(kind: str, record: dict[str, Any]) -> None:
        if kind == "eval":
            evaluations.append(record)
            shown = {k: round(v, 4) for k, v in record.items() if isinstance(v, float)}
            print(f"  [{label}] {time.monotonic() - start:7.0f} s  step {record.get('step')}: {shown}", flush=True)

    stop = FunctionCallback(log, should_stop=lambda: time.monotonic() - start > minutes * 60)
    job = prepare_job(spec, callbacks=[stop])
    job.trainer.train()
    final = job.trainer.evaluate()
    final["step"] = job.trainer.global_step
    final["seconds"] = round(time.monotonic() - start, 1)
    print(f"  [{label}] final: {json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in final.items()})}")
    return final


def pos(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    train_text, held_text, n_train, n_held = split_conllu_documents(args.ewt, held_out=0.25)
    (workdir / "train.conllu").write_text(train_text, encoding="utf-8")
    (workdir / "held.conllu").write_text(held_text, encoding="utf-8")
    print(f"UD EWT dev: {n_train} documents trained on, {n_held} held out")
    spec = JobSpec(dict(task=TOKEN_CLASSIFICATION.name, total_steps=args.steps, batch_size=16, max_seq_length=96,
                        learning_rate=5e-5, warmup_steps=50, eval_every=args.eval_every, eval_batches=1000,
                        checkpoint_every=0, log_every=50),
                   init_from=args.model, data=str(workdir / "train.conllu"), eval_data=str(workdir / "held.conllu"),
                   run_dir=str(workdir / "run-pos"))
    return run(spec, args.minutes, "pos")


def next_choice(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    documents = wiki_documents(args.wiki, args.documents)
    print(f"Wikipedia: {len(documents)} documents (the job holds out a share of whole documents)")
    spec = JobSpec(dict(task=MULTIPLE_CHOICE.name, total_steps=args.steps, batch_size=8, max_seq_length=64,
                        learning_rate=5e-5, warmup_steps=50, eval_every=args.eval_every, eval_batches=100,
                        checkpoint_every=0, log_every=50),
                   init_from=args.model, documents=documents, task_settings=dict(num_choices=4), run_dir=str(workdir / "run-choice"))
    return run(spec, args.minutes, "next-choice")


def sentiment(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    spec = JobSpec(dict(task=CLASSIFICATION.name, total_steps=args.steps, batch_size=16, max_seq_length=64,
                        learning_rate=1e-4, warmup_steps=3, eval_every=args.eval_every, eval_batches=100,
                        checkpoint_every=0, log_every=10),
                   init_from=args.model, data=str(ROOT / "assets" / "examples" / "sentiment.csv"), eval_fraction=0.2,
                   run_dir=str(workdir / "run-sentiment"))
    return run(spec, args.minutes, "sentiment")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", choices=["pos", "next-choice", "sentiment"])
    parser.add_argument("--model", default="default", help="the start model (default: the bundled one)")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-time budget for training")
    parser.add_argument("--steps", type=int, default=100_000, help="at most this many steps")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--documents", type=int, default=3000, help="next-choice: Wikipedia documents to read")
    parser.add_argument("--ewt", type=Path, default=EWT_DEV)
    parser.add_argument("--wiki", type=Path, default=WIKI)
    args = parser.parse_args(argv)
    if args.task == "sentiment" and args.steps == 100_000:
        args.steps, args.eval_every = 60, 10
    with tempfile.TemporaryDirectory(prefix="finetune-quality-") as tmp:
        result = {"pos": pos, "next-choice": next_choice, "sentiment": sentiment}[args.task](args, Path(tmp))
    print(json.dumps({"task": args.task, **result}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
