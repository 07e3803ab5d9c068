"""The training flags both command lines share (``python -m engine.pretrain``, ``python -m engine.finetune``):
defined (``add_training_arguments``), filled from the command's defaults and turned into a validated
``TrainingConfig`` and ``JobSpec``, new or resumed. Messages name the flag the user typed (``FLAGS``).

Arguments default to None so that ``--resume`` can tell which ones were given: a resumed run takes
everything from its run folder (``engine.training.tasks.job_spec.resume_spec``), and the flags given may change
only ``resume_rules.RESUMABLE_FIELDS``. A task's own settings are flags of ``task_flags``. A bad value ends the
program through ``parser.error`` (exit 2).
"""
from __future__ import annotations

import argparse
from typing import Any

from engine.training.jobs.task_flags import setting_flags
from engine.training.loop.config import FINAL_DTYPES, KEEP_OPTIMIZER_STATE, TrainingConfig
from engine.training.loop.report_to import REPORT_TO
from engine.training.runs.resume_rules import check_resume_changes
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.tasks.registry import default_keep_optimizer_state

# JobSpec / TrainingConfig field -> its flag (messages name the flag the user typed)
FLAGS = {"learning_rate": "--lr", "total_steps": "--steps", "warmup_steps": "--warmup",
         "gradient_accumulation_steps": "--grad-accum", "batch_size": "--batch-size",
         "max_seq_length": "--seq-len", "mlm_probability": "--mlm-probability", "eval_every": "--eval-every",
         "eval_batches": "--eval-batches", "checkpoint_every": "--checkpoint-every",
         "checkpoint_every_s": "--checkpoint-every-s", "keep_last_checkpoints":
         "--keep-last", "keep_optimizer_state": "--keep-optimizer-state",
         "final_dtype": "--final-dtype", "log_every": "--log-every", "seed": "--seed", "device": "--device",
         "precision": "--precision", "schedule": "--schedule", "freeze_encoder": "--freeze-encoder",
         "whole_word_masking": "--whole-word", "nsp": "--no-nsp", "task": "--task",
         "preset": "--preset", "corpus": "--corpus", "max_documents": "--max-documents",
         "eval_fraction": "--eval-fraction", "vocab_size": "--vocab-size", "tokenizer": "--tokenizer",
         "init_from": "--init-from", "dropout": "--dropout", "data": "--data", "eval_data": "--eval-data",
         "max_examples": "--max-examples", "run_dir": "--run-dir", "resume_from": "--resume", "report_to": "--report-to"}
# TrainingConfig field -> the argparse dest of its flag
FIELD_ARGS = {"learning_rate": "lr", "total_steps": "steps", "warmup_steps": "warmup",
              "gradient_accumulation_steps": "grad_accum", "batch_size": "batch_size", "max_seq_length": "seq_len",
              "eval_every": "eval_every", "eval_batches": "eval_batches", "checkpoint_every": "checkpoint_every",
              "checkpoint_every_s": "checkpoint_every_s", "keep_last_checkpoints": "keep_last",
              "keep_optimizer_state": "keep_optimizer_state", "final_dtype": "final_dtype",
              "log_every": "log_every", "seed": "seed", "device": "device",
              "schedule": "schedule", "precision": "precision", "freeze_encoder": "freeze_encoder"}


def add_training_arguments(parser: argparse.ArgumentParser, defaults: dict[str, Any]) -> None:
    """The optimizer, schedule, interval, device and bookkeeping flags (help shows ``defaults``)."""
    d, add = defaults, parser.add_argument
    add("--seq-len", type=int, help=f"maximum sequence length (default {d['seq_len']})")
    add("--batch-size", type=int, help=f"sequences per micro-batch, per process (default {d['batch_size']})")
    add("--grad-accum", type=int, help="micro-batches per optimizer step (default 1)")
    add("--lr", type=float, help=f"peak learning rate (default {d['lr']})")
    add("--warmup", type=int, help="warmup steps (default 6%% of --steps)")
    add("--schedule", choices=["linear", "inverse_sqrt"], help="learning-rate decay (default linear)")
    add("--steps", type=int, help=f"total optimizer steps (default {d['steps']}); with --resume, the new total")
    add("--stop-at", type=int, metavar="STEP",
        help="stop with a checkpoint after this step, schedule unchanged (train in chunks; continue with --resume)")
    add("--eval-every", type=int, help=f"evaluate every N steps, 0 never (default {d['eval_every']})")
    add("--eval-batches", type=int, help=f"held-out batches per evaluation, 0 all (default {d['eval_batches']})")
    add("--checkpoint-every", type=int,
        help=f"checkpoint every N steps, 0 only at the end (default {d['checkpoint_every']})")
    add("--checkpoint-every-s", type=float, metavar="SECONDS",
        help=f"also checkpoint after this many seconds of training, 0 never (default {d['checkpoint_every_s']:g})")
    add("--keep-last", type=int, help="keep only the newest N checkpoints (default all; each holds the fp32 "
        "weights and, only needed to resume, an optimizer state about twice their size)")
    add("--keep-optimizer-state", choices=list(KEEP_OPTIMIZER_STATE), help="newest (pretraining's default): only "
        "the newest checkpoint keeps the optimizer state a resume needs, the older ones stay models; while-running "
        "(fine-tuning's default): the same until the run finishes, then its last checkpoint keeps only the model "
        "(a finished run cannot continue: start a new one from it); all: every checkpoint keeps it")
    add("--final-dtype", choices=list(FINAL_DTYPES), help="the weights' dtype in a last checkpoint that keeps only "
        "the model (while-running): auto (the default) keeps a fine-tune's start model's (the bundled model's float16: "
        "half the size of float32) and float32 for pretraining; float32 keeps the trained weights unrounded. "
        "Checkpoints that can resume are always float32")
    add("--log-every", type=int, help="log metrics every N steps (default 1)")
    add("--freeze-encoder", action="store_true", default=None,
        help="train only the heads and the pooler; embeddings and encoder layers stay as they are")
    add("--run-dir", help="where metrics.jsonl and checkpoints go (default runs/<task>-<yyyymmdd-hhmmss>)")
    add("--resume", metavar="RUN_OR_CHECKPOINT", help="continue a run from its newest (or this) checkpoint")
    add("--report-to", choices=REPORT_TO, help="also log losses, lr, tokens/s and evaluations to TensorBoard event "
        "files in <run>/logs (needs the logging extra: pip install tensorboard==2.20.0); default none, with "
        "--resume the run's own")
    add("--seed", type=int, help="random seed (default 0)")
    add("--device", help="auto, cpu, cuda or cuda:N (default auto)")
    add("--precision", choices=["auto", "fp32", "bf16"], help="auto: bf16 autocast on CUDA, fp32 on CPU")
    add("--threads", type=int, help="torch CPU threads per process, 0 for torch's default")
    add("--no-progress", action="store_true", help="no progress bar (one line per logged step instead)")
    add("--debug-dump-weights", action="store_true", help=argparse.SUPPRESS)   # tests: weights per rank


def resumed_spec(args: argparse.Namespace, parser: argparse.ArgumentParser, job_args: dict[str, str],
                 training: dict[str, Any]) -> JobSpec:
    """``--resume``: the run's own spec with the given resumable settings changed; any other flag given
    (``job_args``: JobSpec field -> dest) ends the program with the reason (exit 2)."""
    flags = {**FLAGS, **setting_flags()}
    given = [field for field, dest in job_args.items() if getattr(args, dest, None) is not None]
    given += [name for name in setting_flags() if getattr(args, name, None) is not None]   # a task's own settings
    changes = {field: getattr(args, dest) for field, dest in FIELD_ARGS.items() if getattr(args, dest) is not None}
    changes.update(training)
    try:
        check_resume_changes(given, flags)
        spec = resume_spec(args.resume, changes, run_dir=args.run_dir, names=flags)
        return validated(spec.replace(report_to=args.report_to), parser) if args.report_to is not None else spec
    except FileNotFoundError as exc:
        parser.error(f"--resume: {exc}")
    except ValueError as exc:
        parser.error(str(exc) if str(exc).startswith("cannot change") else f"--resume: {exc}")
    raise AssertionError("unreachable")


def validated(spec: JobSpec, parser: argparse.ArgumentParser) -> JobSpec:
    """``spec`` after ``JobSpec.validate``; a bad value ends the program naming its flag (exit 2)."""
    try:
        spec.validate({**FLAGS, **setting_flags()})
    except ValueError as exc:
        parser.error(flag_names(str(exc)))
    return spec


def apply_defaults(args: argparse.Namespace, defaults: dict[str, Any], parser: argparse.ArgumentParser) -> None:
    """Fill unset arguments from ``defaults`` and check the ones shared by both commands."""
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.threads < 0:
        parser.error(f"--threads must be >= 0, got {args.threads}")


def training_config(args: argparse.Namespace, parser: argparse.ArgumentParser, **fields: Any) -> TrainingConfig:
    """The validated TrainingConfig of the arguments (plus task ``fields``); errors exit 2 naming the flag."""
    try:
        return TrainingConfig(
            learning_rate=args.lr, warmup_steps=args.warmup, total_steps=args.steps, schedule=args.schedule,
            gradient_accumulation_steps=args.grad_accum, batch_size=args.batch_size, max_seq_length=args.seq_len,
            eval_every=args.eval_every, eval_batches=args.eval_batches, checkpoint_every=args.checkpoint_every,
            checkpoint_every_s=args.checkpoint_every_s, keep_last_checkpoints=args.keep_last,
            keep_optimizer_state=(args.keep_optimizer_state
                                  or default_keep_optimizer_state(fields.get("task", "pretraining"))),
            final_dtype=args.final_dtype or "auto",
            log_every=args.log_every, seed=args.seed, device=args.device,
            precision=args.precision, freeze_encoder=bool(args.freeze_encoder), **fields)
    except ValueError as exc:
        parser.error(flag_names(str(exc)))
        raise  # unreachable


def flag_names(message: str) -> str:
    """TrainingConfig's message with the field named as its command-line flag."""
    for field_name, flag in FLAGS.items():
        if message.startswith(field_name + " ") or message.startswith(f"{field_name} ("):
            return flag + message[len(field_name):]
    return message
