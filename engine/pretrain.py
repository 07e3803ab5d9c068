"""``python -m engine.pretrain``: pretrain a BERT (MLM + NSP) from the command line.

The arguments become a ``JobSpec`` (``engine.training.tasks.job_spec``) and ``prepare_job`` makes the trainer,
the same path as the app's training worker; the loop runs with a tqdm progress bar. Under
``torchrun --nproc_per_node=N -m engine.pretrain ...`` the processes join a process group (gloo on
CPU, nccl on CUDA) and train with DistributedDataParallel; only rank 0 prints, logs and writes
checkpoints.

Examples::

    python -m engine.pretrain --preset tiny --max-documents 200 --steps 300
    python -m engine.pretrain --corpus my_notes.md --vocab-size 4000 --run-dir runs/notes
    python -m engine.pretrain --corpus "wiki/**/*.jsonl" --preset mini --steps 100000
    python -m engine.pretrain --dataset wikitext --dataset-config wikitext-103-raw-v1 --text-column text
    python -m engine.pretrain --resume runs/notes --steps 600
    python -m torch.distributed.run --nproc_per_node=2 -m engine.pretrain --steps 100

A corpus is tokenised once, with a progress bar, into the token cache ($BERT_ENGINE_CACHE, else
~/.cache/bert-explorer); every later run on the same corpus and tokenizer reads it memory-mapped.

Ctrl-C finishes the current step, writes a checkpoint and exits (code 130); a second
Ctrl-C aborts at once. Bad arguments exit with code 2 and a one-line reason. A write the disk refuses (full,
read-only, not writable) exits with code 74 and one sentence naming the folder, the fault and the step; the last
good checkpoint is kept, and ``--resume`` continues from it.
``--freeze-encoder`` re-fits the heads only (e.g. MLM/NSP after QA fine-tuning moved the
encoder); heads of ``--init-from`` that pretraining does not use (QA, classification) are kept.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from engine.model.config import PRESETS
from engine.training.jobs import cli, task_flags, training_flags
from engine.training.loop import distributed as dist
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import PreparedJob
from engine.training.tasks.pretraining import PRETRAINING

# Defaults of the CLI (sized for a 2-core CPU); arguments default to None so that --resume
# can tell which ones were given.
DEFAULTS: dict[str, Any] = dict(
    preset="tiny", corpus="shakespeare", max_documents=None, vocab_size=8000, **PRETRAINING.defaults,
    grad_accum=1, lr=5e-4, warmup=None, steps=1000, mlm_probability=0.15, eval_every=100, eval_batches=20,
    checkpoint_every=500, checkpoint_every_s=300.0, keep_last=None, seed=0, device="auto", precision="auto",
    schedule="linear", eval_fraction=0.05, log_every=1, threads=0)
# JobSpec field -> its argparse dest, for the flags that are not TrainingConfig fields
JOB_ARGS = {"preset": "preset", "corpus": "corpus", "max_documents": "max_documents", "eval_fraction": "eval_fraction",
            "dataset": "dataset", "dataset_config": "dataset_config", "dataset_split": "dataset_split",
            "text_column": "text_column",
            "vocab_size": "vocab_size", "tokenizer": "tokenizer", "init_from": "init_from", "dropout": "dropout"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.pretrain", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("--preset", choices=list(PRESETS), help="model size (default tiny)")
    add("--corpus", help="'shakespeare' (built in), or a file, folder or glob of .txt/.md/.jsonl/.parquet/.arrow "
        "files, of any size (default shakespeare)")
    add("--dataset", help="a Hugging Face dataset instead: a name (read from the local cache when offline) or a "
        "folder written by save_to_disk")
    add("--dataset-config", help="the dataset's configuration name")
    add("--dataset-split", help="the dataset's split (default train)")
    add("--text-column", help="the column holding the text in a dataset, .parquet or .arrow corpus (default text)")
    add("--max-documents", type=int, help="use only the first N documents")
    add("--eval-fraction", type=float, help="documents held out for evaluation (default 0.05)")
    add("--vocab-size", type=int, help="train a WordPiece vocabulary of this size on the corpus (default 8000)")
    add("--tokenizer", help="use this tokenizer instead (a directory with tokenizer.json/vocab.txt)")
    add("--init-from", metavar="MODEL_DIR", help="start from an existing BERT or a run's newest checkpoint "
        "(MLM/NSP heads it lacks start fresh; its other heads are kept)")
    add("--dropout", type=float, help="hidden and attention dropout of a new model (default: the preset's, 0.1)")
    add("--mlm-probability", type=float, help="fraction of tokens masked (default 0.15)")
    add("--whole-word", action="store_true", default=None, help="mask whole words")
    add("--no-nsp", action="store_true", default=None, help="no next-sentence prediction (single segments)")
    training_flags.add_training_arguments(p, DEFAULTS)
    task_flags.add_task_settings(p, [PRETRAINING])
    return p


def spec_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> JobSpec:
    """The job the arguments describe; any bad value ends the program through ``parser.error`` (exit 2)."""
    masking = {"mlm_probability": args.mlm_probability, "whole_word_masking": args.whole_word,
               "nsp": None if args.no_nsp is None else not args.no_nsp}
    if args.resume is not None:
        return training_flags.resumed_spec(args, parser, JOB_ARGS, {
            "task": PRETRAINING.name, **{k: v for k, v in masking.items() if v is not None}})
    if args.dataset is not None and args.corpus is not None:
        parser.error("give --corpus or --dataset, not both")
    training_flags.apply_defaults(args, DEFAULTS, parser)
    training = training_flags.training_config(args, parser, mlm_probability=args.mlm_probability,
                                              whole_word_masking=bool(args.whole_word), nsp=not args.no_nsp)
    dataset = {name: getattr(args, name) for name in ("dataset", "dataset_config", "dataset_split", "text_column")
               if getattr(args, name) is not None}
    return training_flags.validated(JobSpec(
        training, preset=args.preset, corpus=args.corpus, max_documents=args.max_documents, **dataset,
        eval_fraction=args.eval_fraction, vocab_size=args.vocab_size,
        tokenizer=args.tokenizer, init_from=args.init_from, dropout=args.dropout,
        run_dir=args.run_dir, report_to=args.report_to,
        task_settings=task_flags.task_settings(args, parser, PRETRAINING, [PRETRAINING])),
        parser)


def describe(job: PreparedJob) -> str:
    """The line printed when training starts."""
    trainer, spec = job.trainer, job.spec
    config = trainer.config
    params = sum(p.numel() for p in trainer.model.parameters())
    return (f"run {trainer.run_dir}: {spec.preset if spec.init_from is None else spec.init_from} "
            f"({params / 1e6:.2f}M parameters), {trainer.train_data.vocab.vocab_size} tokens in vocabulary, "
            f"{trainer.train_data.num_documents:,} training documents ({trainer.train_data.num_tokens:,} tokens), "
            f"device {trainer.device}, "
            f"{dist.world_size()} process(es), global batch "
            f"{config.batch_size * config.gradient_accumulation_steps * dist.world_size()}"
            + (", encoder frozen" if config.freeze_encoder else ""))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return cli.run_main(args, parser, spec_from_args(args, parser), describe, "python -m engine.pretrain")


if __name__ == "__main__":
    sys.exit(main())
