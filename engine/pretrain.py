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
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from . import distributed as dist
from .config import PRESETS, preset
from .corpus import BUILTIN_CORPORA, Document, builtin_corpus, read_documents, train_tokenizer
from .heads import BertWithHeads
from .tokenizer import WordPieceTokenizer
from .run_setup import split_documents
from .trainer import RESUMABLE_OVERRIDES, Trainer, TrainingDiverged, build_datasets
from .training_config import TrainingConfig
from .training_state import INFO_FILE, read_training_state, resolve_checkpoint

RUN_FILE = "run.json"    # how the run's data was made (corpus, documents, split), for --resume
EXIT_INTERRUPTED = 130


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


def default_run_dir() -> str:
    return str(Path("runs") / time.strftime("%Y%m%d-%H%M%S"))


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
    (the encoder, and any MLM/NSP head it has; missing heads are freshly initialised)."""
    heads = ("mlm", "nsp") if options.training.nsp else ("mlm",)
    torch.manual_seed(options.training.seed)
    dropout = {} if options.dropout is None else dict(hidden_dropout_prob=options.dropout,
                                                      attention_probs_dropout_prob=options.dropout)
    if options.init_from is None:
        return BertWithHeads(preset(options.preset, vocab_size=tokenizer.vocab_size, **dropout), heads=heads)
    from .checkpoints import load
    loaded = load(options.init_from)
    if tokenizer.vocab_size > loaded.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but {options.init_from} only "
                         f"{loaded.config.vocab_size} embeddings; use its own tokenizer")
    model = BertWithHeads(loaded.config.replace(**dropout), heads=heads)
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
        from .checkpoints import load
        tokenizer = load(options.init_from).tokenizer
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
    record = {k: v for k, v in asdict(options).items() if k not in ("training", "run_dir")}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


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
                   "schedule", "eval_fraction", "eval_batches")


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
    add("--init-from", metavar="MODEL_DIR", help="start from an existing BERT (heads it lacks start fresh)")
    add("--dropout", type=float, help="hidden and attention dropout of a new model (default: the preset's, 0.1)")
    add("--seq-len", type=int, help="maximum sequence length (default 128)")
    add("--batch-size", type=int, help="sequences per micro-batch, per process (default 32)")
    add("--grad-accum", type=int, help="micro-batches per optimizer step (default 1)")
    add("--lr", type=float, help="peak learning rate (default 5e-4)")
    add("--warmup", type=int, help="warmup steps (default 6%% of --steps)")
    add("--schedule", choices=["linear", "inverse_sqrt"], help="learning-rate decay (default linear)")
    add("--steps", type=int, help="total optimizer steps (default 1000); with --resume, the new total")
    add("--mlm-probability", type=float, help="fraction of tokens masked (default 0.15)")
    add("--whole-word", action="store_true", default=None, help="mask whole words")
    add("--no-nsp", action="store_true", default=None, help="no next-sentence prediction (single segments)")
    add("--eval-every", type=int, help="evaluate every N steps, 0 never (default 100)")
    add("--eval-batches", type=int, help="held-out batches per evaluation, 0 all (default 20)")
    add("--checkpoint-every", type=int, help="checkpoint every N steps, 0 only at the end (default 500)")
    add("--keep-last", type=int, help="keep only the newest N checkpoints")
    add("--log-every", type=int, help="log metrics every N steps (default 1)")
    add("--run-dir", help="where metrics.jsonl and checkpoints go (default runs/<timestamp>)")
    add("--resume", metavar="RUN_OR_CHECKPOINT", help="continue a run from its newest (or this) checkpoint")
    add("--seed", type=int, help="random seed (default 0)")
    add("--device", help="auto, cpu, cuda or cuda:N (default auto)")
    add("--precision", choices=["auto", "fp32", "bf16"], help="auto: bf16 autocast on CUDA, fp32 on CPU")
    add("--threads", type=int, help="torch CPU threads per process, 0 for torch's default")
    add("--no-progress", action="store_true", help="no progress bar (one line per logged step instead)")
    add("--debug-dump-weights", action="store_true", help=argparse.SUPPRESS)   # tests: weights per rank
    return p


def options_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> PretrainOptions:
    """Validated options; any bad value ends the program through ``parser.error`` (exit 2)."""
    if args.resume is not None:
        given = [name for name in FIXED_ON_RESUME if getattr(args, name) is not None]
        if given:
            parser.error("cannot change " + ", ".join("--" + g.replace("_", "-") for g in given)
                         + " when resuming; only --steps, intervals, --device and --precision may change")
        if args.run_dir is None:
            args.run_dir = str(_run_dir_of(args.resume, parser))
        saved = _read_run_file(Path(args.run_dir), Path(args.resume))
        saved.update(_saved_training_args(args.resume))
        for name, value in saved.items():
            if hasattr(args, name) and getattr(args, name) is None:
                setattr(args, name, value)
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.max_documents is not None and args.max_documents < 1:
        parser.error(f"--max-documents must be >= 1, got {args.max_documents}")
    if args.vocab_size < 16:
        parser.error(f"--vocab-size must be at least 16, got {args.vocab_size}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.threads < 0:
        parser.error(f"--threads must be >= 0, got {args.threads}")
    if not 0.0 <= args.eval_fraction < 1.0:
        parser.error(f"--eval-fraction must be in [0, 1), got {args.eval_fraction}")
    if args.corpus not in BUILTIN_CORPORA and not Path(args.corpus).is_file():
        parser.error(f"--corpus: no built-in corpus or file named {args.corpus!r} "
                     f"(built in: {', '.join(BUILTIN_CORPORA)})")
    if args.tokenizer is not None and not Path(args.tokenizer).exists():
        parser.error(f"--tokenizer: no such file or directory: {args.tokenizer}")
    try:
        training = TrainingConfig(
            learning_rate=args.lr, warmup_steps=args.warmup, total_steps=args.steps, schedule=args.schedule,
            gradient_accumulation_steps=args.grad_accum, batch_size=args.batch_size, max_seq_length=args.seq_len,
            mlm_probability=args.mlm_probability, whole_word_masking=bool(args.whole_word), nsp=not args.no_nsp,
            eval_every=args.eval_every, eval_batches=args.eval_batches, checkpoint_every=args.checkpoint_every,
            keep_last_checkpoints=args.keep_last, log_every=args.log_every, seed=args.seed, device=args.device,
            precision=args.precision)
        if args.init_from is None and args.resume is None:
            training.check_model(preset(args.preset))
    except ValueError as exc:
        parser.error(_flag_names(str(exc)))
    return PretrainOptions(training, args.preset, args.corpus, args.max_documents, args.eval_fraction,
                           args.vocab_size, args.tokenizer, args.init_from, args.dropout, args.run_dir)


_FLAGS = {"learning_rate": "--lr", "total_steps": "--steps", "warmup_steps": "--warmup",
          "gradient_accumulation_steps": "--grad-accum", "batch_size": "--batch-size",
          "max_seq_length": "--seq-len", "mlm_probability": "--mlm-probability", "eval_every": "--eval-every",
          "eval_batches": "--eval-batches", "checkpoint_every": "--checkpoint-every", "keep_last_checkpoints":
          "--keep-last", "log_every": "--log-every", "seed": "--seed", "device": "--device"}


def _flag_names(message: str) -> str:
    """TrainingConfig's message with the field named as its command-line flag."""
    for field_name, flag in _FLAGS.items():
        if message.startswith(field_name + " ") or message.startswith(f"{field_name} ("):
            return flag + message[len(field_name):]
    return message


def _saved_training_args(resume: str) -> dict[str, Any]:
    """The resumed run's training settings as argument values (so unset flags keep the run's)."""
    info = json.loads((resolve_checkpoint(resume) / INFO_FILE).read_text(encoding="utf-8"))
    config = TrainingConfig.from_dict(info["config"])
    values = {arg: getattr(config, field_name) for field_name, arg in _FIELD_ARGS.items()}
    values.update(whole_word=config.whole_word_masking, no_nsp=not config.nsp)
    return values


_FIELD_ARGS = {flag_field: flag[2:].replace("-", "_") for flag_field, flag in _FLAGS.items()}
_FIELD_ARGS.update(schedule="schedule", precision="precision")


def _run_dir_of(resume: str, parser: argparse.ArgumentParser) -> Path:
    try:
        return resolve_checkpoint(resume).parent.parent
    except (FileNotFoundError, ValueError) as exc:
        parser.error(f"--resume: {exc}")
        raise  # unreachable


def _read_run_file(run_dir: Path, resume: Path) -> dict[str, Any]:
    for folder in (run_dir, resume, resume.parent.parent):
        path = folder / RUN_FILE
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                pass
    return {}


class _Interrupt:
    """First Ctrl-C (or SIGTERM): stop after the current step and checkpoint. Second: abort."""

    def __init__(self) -> None:
        self.requested = False
        self._seen: set[int] = set()
        self._first = 0.0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        # the same signal again (over a second later) aborts; a launcher forwarding the terminal's
        # Ctrl-C at once, or torchrun's SIGTERM after a SIGINT, does not
        now = time.monotonic()
        if signum in self._seen and now - self._first > 1.0:
            self.restore()
            raise KeyboardInterrupt
        self._seen.add(signum)
        if self.requested:
            return
        self.requested, self._first = True, now
        if dist.is_main_process():
            print("\ninterrupted: finishing this step and saving a checkpoint (Ctrl-C again to abort)",
                  file=sys.stderr, flush=True)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = options_from_args(args, parser)
    if args.threads:
        torch.set_num_threads(args.threads)
    options.training = options.training.replace(device=dist.init_from_env(options.training.device))
    main_process = dist.is_main_process()

    def say(message: str) -> None:
        if main_process:
            print(message, file=sys.stderr, flush=True)

    try:
        options.run_dir = dist.broadcast_object(options.run_dir or default_run_dir())
        try:
            trainer = prepare_run(options, args.resume, say)
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            if main_process:
                parser.print_usage(sys.stderr)
                print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return 2
        if main_process:
            write_run_file(trainer.run_dir, options)
        config = trainer.config
        params = sum(p.numel() for p in trainer.model.parameters())
        say(f"run {trainer.run_dir}: {options.preset if options.init_from is None else options.init_from} "
            f"({params / 1e6:.2f}M parameters), {trainer.train_data.vocab.vocab_size} tokens in vocabulary, "
            f"{len(trainer.train_data.instances(0))} training instances, device {trainer.device}, "
            f"{dist.world_size()} process(es), global batch "
            f"{config.batch_size * config.gradient_accumulation_steps * dist.world_size()}")
        return _train(trainer, args, options, main_process, say)
    finally:
        dist.cleanup()


def _train(trainer: Trainer, args: argparse.Namespace, options: PretrainOptions, main_process: bool,
           say: Callable[[str], None]) -> int:
    from tqdm import tqdm

    config = trainer.config
    bar = tqdm(total=config.total_steps, initial=trainer.global_step, unit="step", dynamic_ncols=True,
               disable=not main_process or args.no_progress, file=sys.stderr, desc="pretrain")
    interrupt = _Interrupt()
    interrupt.install()

    def callback(kind: str, record: dict[str, Any]) -> None:
        if kind == "train":
            text = (f"mlm_loss={_fmt(record['mlm_loss'], '.4f')} nsp_loss={_fmt(record['nsp_loss'], '.4f')} "
                    f"lr={record['lr']:.2e} tok/s={record['tokens_per_s']:.0f}")
            bar.update(record["step"] - bar.n)
            bar.set_postfix_str(text, refresh=True)
            if args.no_progress:
                say(f"step {record['step']}/{config.total_steps} {text}")
        elif kind == "eval":
            bar.write(f"step {record['step']} eval: mlm_loss={_fmt(record['eval_mlm_loss'], '.4f')} "
                      f"mlm_acc={_fmt(record['eval_mlm_acc'], '.3f')} "
                      f"nsp_loss={_fmt(record['eval_nsp_loss'], '.4f')} "
                      f"nsp_acc={_fmt(record['eval_nsp_acc'], '.3f')}", file=sys.stderr)
        elif kind == "checkpoint":
            bar.write(f"step {record['step']}: checkpoint {record['path']}", file=sys.stderr)

    def should_stop() -> bool:
        return dist.any_process(interrupt.requested, trainer.device)

    try:
        result = trainer.train(callback=callback if main_process else None, should_stop=should_stop)
    except TrainingDiverged as exc:
        bar.close()
        say(f"error: {exc}")
        return 1
    finally:
        bar.close()
        interrupt.restore()
    if result.status == "stopped":
        if trainer.global_step > 0 and (trainer.last_checkpoint is None
                                        or trainer.last_checkpoint.name != f"step-{trainer.global_step:06d}"):
            path = trainer.save_checkpoint()
            say(f"saved {path}")
        say(f"stopped at step {trainer.global_step}; continue with: python -m engine.pretrain "
            f"--resume {trainer.run_dir}")
    else:
        say(f"done: step {trainer.global_step}; checkpoints in {trainer.run_dir / 'checkpoints'}")
    if args.debug_dump_weights:
        weights = {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}
        torch.save(weights, trainer.run_dir / f"weights-rank{dist.rank()}.pt")
    dist.barrier()
    return EXIT_INTERRUPTED if result.status == "stopped" else 0


if __name__ == "__main__":
    sys.exit(main())
