"""What ``python -m engine.pretrain`` and ``python -m engine.finetune`` share: the training
arguments, resuming a run's settings, Ctrl-C handling, and the progress-bar training loop.

Arguments default to None so that ``--resume`` can tell which ones were given; a run's
settings are read back from its ``run.json`` and its checkpoint's training config.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from engine.training import distributed as dist
from engine.training.trainer import Trainer, TrainingDiverged
from engine.training.config import TrainingConfig
from engine.training.state import CHECKPOINTS_DIR, INFO_FILE, checkpoint_name, resolve_checkpoint

RUN_FILE = "run.json"    # how the run's data was made (corpus or data files, split), for --resume
EXIT_INTERRUPTED = 130
# TrainingConfig field -> its flag (messages name the flag the user typed)
FLAGS = {"learning_rate": "--lr", "total_steps": "--steps", "warmup_steps": "--warmup",
         "gradient_accumulation_steps": "--grad-accum", "batch_size": "--batch-size",
         "max_seq_length": "--seq-len", "mlm_probability": "--mlm-probability", "eval_every": "--eval-every",
         "eval_batches": "--eval-batches", "checkpoint_every": "--checkpoint-every", "keep_last_checkpoints":
         "--keep-last", "log_every": "--log-every", "seed": "--seed", "device": "--device"}
FIELD_ARGS = {field_name: flag[2:].replace("-", "_") for field_name, flag in FLAGS.items()}
FIELD_ARGS.update(schedule="schedule", precision="precision", freeze_encoder="freeze_encoder")


def default_run_dir() -> str:
    """``runs/<timestamp>``."""
    return str(Path("runs") / time.strftime("%Y%m%d-%H%M%S"))


def model_source(source: str) -> str:
    """``--init-from``: a run directory stands for its newest complete checkpoint; anything else
    (``default``, a model directory, a hub id) goes to ``checkpoints.load`` as it is."""
    path = Path(source)
    if (path / CHECKPOINTS_DIR).is_dir() and not (path / "config.json").exists():
        return str(resolve_checkpoint(path))
    return source


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
    add("--keep-last", type=int, help="keep only the newest N checkpoints")
    add("--log-every", type=int, help="log metrics every N steps (default 1)")
    add("--freeze-encoder", action="store_true", default=None,
        help="train only the heads and the pooler; embeddings and encoder layers stay as they are")
    add("--run-dir", help="where metrics.jsonl and checkpoints go (default runs/<timestamp>)")
    add("--resume", metavar="RUN_OR_CHECKPOINT", help="continue a run from its newest (or this) checkpoint")
    add("--seed", type=int, help="random seed (default 0)")
    add("--device", help="auto, cpu, cuda or cuda:N (default auto)")
    add("--precision", choices=["auto", "fp32", "bf16"], help="auto: bf16 autocast on CUDA, fp32 on CPU")
    add("--threads", type=int, help="torch CPU threads per process, 0 for torch's default")
    add("--no-progress", action="store_true", help="no progress bar (one line per logged step instead)")
    add("--debug-dump-weights", action="store_true", help=argparse.SUPPRESS)   # tests: weights per rank


def apply_resume(args: argparse.Namespace, parser: argparse.ArgumentParser, fixed: Sequence[str]) -> None:
    """With ``--resume``: refuse flags in ``fixed``, default ``--run-dir`` to the run's, and fill every
    flag not given from the run's ``run.json`` and its checkpoint's training config."""
    if args.resume is None:
        return
    given = [name for name in fixed if getattr(args, name, None) is not None]
    if given:
        parser.error("cannot change " + ", ".join("--" + g.replace("_", "-") for g in given)
                     + " when resuming; only --steps, intervals, --device and --precision may change")
    if args.run_dir is None:
        try:
            args.run_dir = str(resolve_checkpoint(args.resume).parent.parent)
        except (FileNotFoundError, ValueError) as exc:
            parser.error(f"--resume: {exc}")
    saved = read_run_file(Path(args.run_dir), Path(args.resume))
    saved.update(saved_training_args(args.resume))
    for name, value in saved.items():
        if hasattr(args, name) and getattr(args, name) is None:
            setattr(args, name, value)


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
            keep_last_checkpoints=args.keep_last, log_every=args.log_every, seed=args.seed, device=args.device,
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


def saved_training_args(resume: str) -> dict[str, Any]:
    """The resumed run's training settings as argument values (so unset flags keep the run's)."""
    info = json.loads((resolve_checkpoint(resume) / INFO_FILE).read_text(encoding="utf-8"))
    config = TrainingConfig.from_dict(info["config"])
    values = {arg: getattr(config, field_name) for field_name, arg in FIELD_ARGS.items()}
    values.update(whole_word=config.whole_word_masking, no_nsp=not config.nsp, task=config.task)
    return values


def read_run_file(run_dir: Path, resume: Path) -> dict[str, Any]:
    """The ``run.json`` of the run being resumed ({} when there is none)."""
    for folder in (run_dir, resume, resume.parent.parent):
        path = folder / RUN_FILE
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                pass
    return {}


def write_run_file(run_dir: Path, record: dict[str, Any]) -> None:
    """Write ``run.json``: how the run's data were made, read back by ``--resume``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


class Interrupt:
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


def fmt(value: Any, spec: str) -> str:
    """``format(value, spec)``, or "-" for a metric that has no value (e.g. NSP off)."""
    return "-" if value is None else format(value, spec)


# what the progress bar shows per task: (metric, format)
SHOWN = {"pretraining": (("mlm_loss", ".4f"), ("nsp_loss", ".4f")),
         "qa": (("qa_loss", ".4f"), ("start_acc", ".3f"), ("end_acc", ".3f")),
         "qa_mlm": (("mlm_loss", ".4f"), ("qa_loss", ".4f"), ("start_acc", ".3f")),
         "classification": (("classification_loss", ".4f"), ("accuracy", ".3f"))}


def run_main(args: argparse.Namespace, parser: argparse.ArgumentParser, device: str,
             prepare: Callable[[str, Callable[[str], None]], Trainer], started: Callable[[Trainer], str],
             command: str) -> int:
    """Join torchrun's process group, build the trainer with ``prepare(device, say)`` (its ValueError,
    FileNotFoundError or RuntimeError exits 2 as a usage error), print ``started(trainer)`` and train."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = dist.init_from_env(device)
    main_process = dist.is_main_process()

    def say(message: str) -> None:
        if main_process:
            print(message, file=sys.stderr, flush=True)

    try:
        args.run_dir = dist.broadcast_object(args.run_dir or default_run_dir())
        try:
            trainer = prepare(device, say)
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            if main_process:
                parser.print_usage(sys.stderr)
                print(f"{parser.prog}: error: {flag_names(str(exc))}", file=sys.stderr)
            return 2
        say(started(trainer))
        return train_with_progress(trainer, args, main_process, say, command)
    finally:
        dist.cleanup()


def train_with_progress(trainer: Trainer, args: argparse.Namespace, main_process: bool,
                        say: Callable[[str], None], command: str) -> int:
    """``trainer.train`` with a tqdm bar (or a line per logged step); Ctrl-C saves a checkpoint.
    Returns 0 when finished, 130 when interrupted, 1 when the loss diverged."""
    from tqdm import tqdm

    config = trainer.config
    shown = SHOWN.get(config.task, ())
    bar = tqdm(total=config.total_steps, initial=trainer.global_step, unit="step", dynamic_ncols=True,
               disable=not main_process or args.no_progress, file=sys.stderr, desc=config.task)
    interrupt = Interrupt()
    interrupt.install()

    def callback(kind: str, record: dict[str, Any]) -> None:
        if kind == "train":
            text = " ".join(f"{name}={fmt(record.get(name), spec)}" for name, spec in shown)
            text += f" lr={record['lr']:.2e} tok/s={record['tokens_per_s']:.0f}"
            bar.update(record["step"] - bar.n)
            bar.set_postfix_str(text, refresh=True)
            if args.no_progress:
                say(f"step {record['step']}/{config.total_steps} {text}")
        elif kind == "eval":
            text = " ".join(f"{name[5:]}={fmt(value, '.4f' if 'loss' in name else '.3f')}"
                            for name, value in record.items() if name.startswith("eval_"))
            bar.write(f"step {record['step']} eval: {text}", file=sys.stderr)
        elif kind == "checkpoint":
            bar.write(f"step {record['step']}: checkpoint {record['path']}", file=sys.stderr)

    stop_at = getattr(args, "stop_at", None)

    def should_stop() -> bool:
        reached = stop_at is not None and trainer.global_step >= stop_at
        return dist.any_process(interrupt.requested or reached, trainer.device)

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
                                        or trainer.last_checkpoint.name != checkpoint_name(trainer.global_step)):
            path = trainer.save_checkpoint()
            say(f"saved {path}")
        say(f"stopped at step {trainer.global_step}; continue with: {command} --resume {trainer.run_dir}")
    else:
        say(f"done: step {trainer.global_step}; checkpoints in {trainer.run_dir / 'checkpoints'}")
    if getattr(args, "debug_dump_weights", False):
        weights = {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}
        torch.save(weights, trainer.run_dir / f"weights-rank{dist.rank()}.pt")
    dist.barrier()
    interrupted = result.status == "stopped" and not (stop_at is not None and trainer.global_step >= stop_at)
    return EXIT_INTERRUPTED if interrupted else 0
