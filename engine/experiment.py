"""``python -m engine.experiment``: re-run one of the BERT paper's ablations small, and print ours beside its table.

Each arm is an ordinary pretraining run under ``--root`` (default ``runs/experiments``; watch it in the app's run
browser, probe its checkpoints in every tab), fine-tuned and measured the same way as every other arm
(``engine.experiments``). A stopped experiment (Ctrl-C, a crash, ``kill -9``) continues where it stopped when run
again with the same arguments, with the same numbers.

Examples::

    python -m engine.experiment --list
    python -m engine.experiment bert-table8 --quick
    python -m engine.experiment bert-table5 --seeds 3 --steps 3000 --csv table5.csv --json table5.json
    torchrun --nproc-per-node 2 -m engine.experiment bert-table8 --quick     # two arms at once
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import torch

from engine.experiments import results as shown
from engine.experiments import sharding
from engine.experiments.builtin import EXPERIMENTS, experiment
from engine.experiments.features import CLASSIFIERS
from engine.experiments.runner import run_experiment
from engine.training.loop.distributed import env_world_size


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.experiment", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("name", nargs="?", help=f"the experiment: {', '.join(EXPERIMENTS)}")
    add("--list", action="store_true", help="list the experiments and exit")
    add("--quick", action="store_true", help="the small scale (each built-in one within 20 min on 2 CPU cores)")
    add("--seeds", type=int, help="seeds per arm (the spread the verdicts judge by needs 2 or more)")
    add("--steps", type=int, help="pretraining steps per arm")
    add("--preset", help="model size of every arm (tiny, mini, small, ...)")
    add("--max-documents", type=int, help="documents of the corpus every arm pretrains on")
    add("--eval-documents", type=int, help="the documents after those that measure the masked-token accuracy")
    add("--downstream-steps", type=int, help="fine-tuning steps of each downstream evaluation")
    add("--feature-classifier", choices=CLASSIFIERS, help="what reads frozen features (Tables 7 and 8): the "
                                                          "logistic regression (default) or the paper's BiLSTM")
    add("--arms", help="only these arms, comma-separated")
    add("--root", default="runs/experiments", help="where the runs go (default runs/experiments)")
    add("--csv", type=Path, help="also write one row per arm and seed to this CSV file")
    add("--json", type=Path, help="also write the whole result to this JSON file")
    add("--threads", type=int, default=0, help="torch threads (0: leave default; under torchrun, the CPUs shared "
                                                 "among this machine's processes)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list or args.name is None:
        for e in EXPERIMENTS.values():
            print(f"{e.name}: {e.title} — {e.source}; {len(e.arms)} arms")
        return 0 if args.list else 2
    try:
        chosen = experiment(args.name)
    except KeyError as exc:
        parser.error(str(exc.args[0]))
    for flag, value in (("--seeds", args.seeds), ("--steps", args.steps), ("--max-documents", args.max_documents),
                        ("--eval-documents", args.eval_documents), ("--downstream-steps", args.downstream_steps)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be at least 1, got {value}")
    arms = None if args.arms is None else [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(arms or ()) - {arm.name for arm in chosen.arms})
    if unknown:
        parser.error(f"{chosen.name} has no arm {', '.join(unknown)}; its arms: "
                     f"{', '.join(arm.name for arm in chosen.arms)}")
    shared = env_world_size() > 1                    # under torchrun: this process runs its share of the arms
    if args.threads or shared:
        torch.set_num_threads(args.threads or sharding.threads_per_rank())
    scale = chosen.scale(args.quick, seeds=args.seeds, steps=args.steps, preset=args.preset,
                         max_documents=args.max_documents, eval_documents=args.eval_documents,
                         downstream_steps=args.downstream_steps, feature_classifier=args.feature_classifier)
    say = lambda message: print(message, file=sys.stderr, flush=True)   # noqa: E731
    try:
        found = (sharding.run_shared(args.root, chosen, scale, say, arms) if shared
                 else run_experiment(args.root, chosen, scale, say, arms))
    except KeyboardInterrupt:
        say(f"stopped: run the same command again to continue ({args.root}/{chosen.name})")
        return 130
    if found is None:                                # not rank 0: rank 0 prints the table
        return 0
    print(shown.table(chosen, scale, found))
    if args.csv:
        args.csv.write_text(shown.as_csv(chosen, found), encoding="utf-8")
    if args.json:
        args.json.write_text(shown.as_json(chosen, scale, found), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
