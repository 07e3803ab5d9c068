"""``python -m engine.pretrain``: pretrain a BERT (MLM + NSP) from the command line.

The same code path as the app's background worker: ``prepare_run`` turns a
``PretrainOptions`` into a ready ``Trainer`` (corpus -> tokenizer -> datasets -> model, or
a resumed run), and the CLI calls ``trainer.train(callback=..., should_stop=...)`` with a
tqdm progress bar. Under ``torchrun --nproc_per_node=N -m engine.pretrain ...`` the
processes join a process group (gloo on CPU, nccl on CUDA) and train with
DistributedDataParallel; only rank 0 prints, logs and writes checkpoints.

Examples::

    python -m engine.pretrain --preset tiny --max-documents 200 --steps 300
    python -m engine.pretrain --corpus my_notes.md --vocab-size 4000 --run-dir runs/notes
    python -m engine.pretrain --resume runs/notes --steps 600
    python -m torch.distributed.run --nproc_per_node=2 -m engine.pretrain --steps 100

Ctrl-C finishes the current step, writes a checkpoint and exits (code 130); a second
Ctrl-C aborts at once. Bad arguments exit with code 2 and a one-line reason.
``--freeze-encoder`` re-fits the heads only (e.g. MLM/NSP after QA fine-tuning moved the
encoder); heads of ``--init-from`` that pretraining does not use (QA, classification) are kept.
The argument handling and the training loop are shared with ``engine.finetune`` (``engine.training.cli``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from engine.training import cli
from engine.training import distributed as dist
from engine.training.cli import EXIT_INTERRUPTED, RUN_FILE, default_run_dir  # noqa: F401 (public here)
from engine.model.config import PRESETS, preset
from engine.text.corpus import BUILTIN_CORPORA, Document, builtin_corpus, read_documents, train_tokenizer
from engine.model.heads import HEADS, BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.run_setup import split_documents
from engine.training.trainer import RESUMABLE_OVERRIDES, Trainer, build_datasets
from engine.training.config import TrainingConfig
from engine.training.state import read_training_state, resolve_checkpoint


@dataclass
class PretrainOptions:
    """Everything a pretraining run needs besides the TrainingConfig (the worker fills this too)."""

    training: TrainingConfig
    preset: str = "tiny"
    corpus: str = "shakespeare"                 # a built-in corpus name or a .txt/.md/.jsonl path
    max_documents: int | None = None
    eval_fraction: float = 0.05
    vocab_size: int = 8000                      # WordPiece trained on the corpus, unless tokenizer is given
    tokenizer: str | None = None                # a directory/file with tokenizer.json or vocab.txt
    init_from: str | None = None                # an HF BERT directory (or hub id) to start from
    dropout: float | None = None                # hidden and attention dropout; None: the preset's (0.1)
    run_dir: str | None = None


def load_corpus(corpus: str, max_documents: int | None = None) -> list[Document]:
    """A built-in corpus by name, or the documents of a .txt/.md/.jsonl file."""
    if corpus in BUILTIN_CORPORA:
        return builtin_corpus(corpus, max_documents=max_documents)
    documents = read_documents(corpus)
    return documents[:max_documents] if max_documents is not None else documents


def split_corpus(options: PretrainOptions) -> tuple[list[Document], list[Document]]:
    """(training, held-out) documents, split by the run's seed exactly as the worker splits them."""
    documents = load_corpus(options.corpus, options.max_documents)
    return split_documents(documents, options.eval_fraction, options.training.seed, options.training.nsp)


def _shared_tokenizer(make: Callable[[], WordPieceTokenizer]) -> WordPieceTokenizer:
    """Rank 0 makes the tokenizer and every process gets the very same vocabulary."""
    payload: Any = None
    if dist.is_main_process():
        try:
            payload = make().backend.to_str()
        except Exception as exc:  # handed to the other ranks so that every process stops alike
            payload = exc
    payload = dist.broadcast_object(payload)
    if isinstance(payload, Exception):
        raise payload
    from tokenizers import Tokenizer
    return WordPieceTokenizer(Tokenizer.from_str(payload))


def build_model(options: PretrainOptions, tokenizer: WordPieceTokenizer) -> BertWithHeads:
    """A fresh ``preset`` BERT with MLM (+ NSP) heads, or one whose weights start from ``init_from``
    (the encoder and every head it has, QA and classification included; missing MLM/NSP heads
    are freshly initialised)."""
    heads = ("mlm", "nsp") if options.training.nsp else ("mlm",)
    torch.manual_seed(options.training.seed)
    dropout = {} if options.dropout is None else dict(hidden_dropout_prob=options.dropout,
                                                      attention_probs_dropout_prob=options.dropout)
    if options.init_from is None:
        return BertWithHeads(preset(options.preset, vocab_size=tokenizer.vocab_size, **dropout), heads=heads)
    from engine.checkpoints.hf_format import load
    loaded = load(cli.model_source(options.init_from))
    if tokenizer.vocab_size > loaded.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but {options.init_from} only "
                         f"{loaded.config.vocab_size} embeddings; use its own tokenizer")
    model = BertWithHeads(loaded.config.replace(**dropout), heads=tuple(h for h in HEADS
                                                                         if h in heads or h in loaded.heads))
    ours = model.state_dict()
    theirs = {k: v for k, v in loaded.model.state_dict().items() if k in ours and ours[k].shape == v.shape}
    model.load_state_dict(theirs, strict=False)
    return model


def prepare_run(options: PretrainOptions, resume: str | None = None,
                log: Callable[[str], None] = lambda message: None) -> Trainer:
    """A ready ``Trainer``: a new run from ``options``, or ``resume`` (a run or checkpoint directory)
    continued with ``options.training``'s resumable fields (total_steps, intervals, device)."""
    config = options.training
    if resume is not None:
        checkpoint = resolve_checkpoint(resume)
        state = read_training_state(checkpoint)
        saved = TrainingConfig.from_dict(state["config"])
        if saved.task != "pretraining":
            raise ValueError(f"{checkpoint} is a {saved.task} run; continue it with python -m engine.finetune")
        options.training = saved   # the data are rebuilt exactly as the run made them
        tokenizer = WordPieceTokenizer.from_file(checkpoint)
        log(f"resuming {checkpoint} (step {state['step']})")
        train_docs, eval_docs = split_corpus(options)
        train_data, eval_data = build_datasets(train_docs, eval_docs, tokenizer, saved)
        overrides = {name: getattr(config, name) for name in sorted(RESUMABLE_OVERRIDES)
                     if getattr(config, name) != getattr(saved, name)}
        options.training = saved.replace(**overrides)
        return Trainer.resume(checkpoint, train_data, eval_data, run_dir=options.run_dir, **overrides)
    train_docs, eval_docs = split_corpus(options)
    if options.tokenizer is not None:
        tokenizer = WordPieceTokenizer.from_file(options.tokenizer)
    elif options.init_from is not None:
        from engine.checkpoints.hf_format import load
        tokenizer = load(cli.model_source(options.init_from)).tokenizer
        if tokenizer is None:
            raise ValueError(f"{options.init_from} has no tokenizer; give one with --tokenizer")
    else:
        log(f"training a WordPiece vocabulary of {options.vocab_size} on {len(train_docs)} documents")
        tokenizer = _shared_tokenizer(lambda: train_tokenizer(train_docs, options.vocab_size))
    model = build_model(options, tokenizer)
    config.check_model(model.config)
    train_data, eval_data = build_datasets(train_docs, eval_docs, tokenizer, config)
    return Trainer(model, tokenizer, train_data, eval_data, config, options.run_dir or default_run_dir())


def write_run_file(run_dir: Path, options: PretrainOptions) -> None:
    cli.write_run_file(run_dir, {k: v for k, v in asdict(options).items() if k not in ("training", "run_dir")})


# ---------------------------------------------------------------------------- command line
# Defaults of the CLI (sized for a 2-core CPU); arguments default to None so that --resume
# can tell which ones were given.
DEFAULTS: dict[str, Any] = dict(
    preset="tiny", corpus="shakespeare", max_documents=None, vocab_size=8000, seq_len=128, batch_size=32,
    grad_accum=1, lr=5e-4, warmup=None, steps=1000, mlm_probability=0.15, eval_every=100, eval_batches=20,
    checkpoint_every=500, keep_last=None, seed=0, device="auto", precision="auto", schedule="linear",
    eval_fraction=0.05, log_every=1, threads=0)
# Options that define the data or the model: fixed once a run exists.
FIXED_ON_RESUME = ("preset", "dropout", "corpus", "max_documents", "vocab_size", "tokenizer", "init_from", "seq_len",
                   "batch_size", "grad_accum", "lr", "warmup", "mlm_probability", "whole_word", "no_nsp", "seed",
                   "schedule", "eval_fraction", "eval_batches", "freeze_encoder")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.pretrain", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("--preset", choices=list(PRESETS), help="model size (default tiny)")
    add("--corpus", help="'shakespeare' (built in) or a .txt/.md/.jsonl file (default shakespeare)")
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
    cli.add_training_arguments(p, DEFAULTS)
    return p


def options_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> PretrainOptions:
    """Validated options; any bad value ends the program through ``parser.error`` (exit 2)."""
    cli.apply_resume(args, parser, FIXED_ON_RESUME)
    cli.apply_defaults(args, DEFAULTS, parser)
    if args.max_documents is not None and args.max_documents < 1:
        parser.error(f"--max-documents must be >= 1, got {args.max_documents}")
    if args.vocab_size < 16:
        parser.error(f"--vocab-size must be at least 16, got {args.vocab_size}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if not 0.0 <= args.eval_fraction < 1.0:
        parser.error(f"--eval-fraction must be in [0, 1), got {args.eval_fraction}")
    if args.corpus not in BUILTIN_CORPORA and not Path(args.corpus).is_file():
        parser.error(f"--corpus: no built-in corpus or file named {args.corpus!r} "
                     f"(built in: {', '.join(BUILTIN_CORPORA)})")
    if args.tokenizer is not None and not Path(args.tokenizer).exists():
        parser.error(f"--tokenizer: no such file or directory: {args.tokenizer}")
    training = cli.training_config(args, parser, mlm_probability=args.mlm_probability,
                                   whole_word_masking=bool(args.whole_word), nsp=not args.no_nsp)
    if args.init_from is None and args.resume is None:
        try:
            training.check_model(preset(args.preset))
        except ValueError as exc:
            parser.error(cli.flag_names(str(exc)))
    return PretrainOptions(training, args.preset, args.corpus, args.max_documents, args.eval_fraction,
                           args.vocab_size, args.tokenizer, args.init_from, args.dropout, args.run_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = options_from_args(args, parser)

    def prepare(device: str, say: Callable[[str], None]) -> Trainer:
        options.training = options.training.replace(device=device)
        options.run_dir = args.run_dir
        trainer = prepare_run(options, args.resume, say)
        if dist.is_main_process():
            write_run_file(trainer.run_dir, options)
        return trainer

    def started(trainer: Trainer) -> str:
        config = trainer.config
        params = sum(p.numel() for p in trainer.model.parameters())
        return (f"run {trainer.run_dir}: {options.preset if options.init_from is None else options.init_from} "
                f"({params / 1e6:.2f}M parameters), {trainer.train_data.vocab.vocab_size} tokens in vocabulary, "
                f"{len(trainer.train_data.instances(0))} training instances, device {trainer.device}, "
                f"{dist.world_size()} process(es), global batch "
                f"{config.batch_size * config.gradient_accumulation_steps * dist.world_size()}"
                + (", encoder frozen" if config.freeze_encoder else ""))

    return cli.run_main(args, parser, options.training.device, prepare, started, "python -m engine.pretrain")


if __name__ == "__main__":
    sys.exit(main())
