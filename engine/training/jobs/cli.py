"""Running a job from the command line, for ``python -m engine.pretrain`` and ``python -m engine.finetune``: the
process group, preparing the job (a bar while the corpus is read), the training loop with a progress bar, Ctrl-C
handling, the lines a run prints at its end, and the exit codes.

The arguments and the ``JobSpec`` they make are ``engine.training.jobs.training_flags``.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from engine.disk_faults import DiskFault
from engine.training.loop.train_result import TrainStatus
from engine.training.loop import distributed as dist
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import PreparedJob, default_run_dir, prepare_job
from engine.training.jobs.training_flags import flag_names
from engine.training.runs.run_folder import checkpoint_name
from engine.training.runs.state import STATE_FILE
from engine.training.loop.divergence import TrainingDiverged
from engine.training.loop.trainer import Trainer
from engine.training.tasks.registry import task_definition

EXIT_INTERRUPTED = 130
EXIT_DISK_FAULT = 74          # sysexits' EX_IOERR: a write the disk refused (full, read-only: a DiskFault)


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


def run_main(args: argparse.Namespace, parser: argparse.ArgumentParser, spec: JobSpec,
             started: Callable[[PreparedJob], str], command: str) -> int:
    """Join torchrun's process group, prepare the job (``prepare_job``; its ValueError, FileNotFoundError
    or RuntimeError exits 2 as a usage error), print ``started(job)`` and train. A ``DiskFault`` (full or
    read-only disk) prints its sentence and exits ``EXIT_DISK_FAULT``."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = dist.init_from_env(spec.training_config().device)
    main_process = dist.is_main_process()

    def say(message: str) -> None:
        if main_process:
            print(message, file=sys.stderr, flush=True)

    try:
        if spec.resume_from is None:
            spec = spec.replace(run_dir=dist.broadcast_object(spec.run_dir or default_run_dir(spec.task)),
                                training=spec.training_config().replace(device=device))
        else:
            spec = spec.replace(training={**spec.given_training(), "device": device})
        reading = ReadingBar(main_process and not args.no_progress)

        def stage(message: str) -> None:     # a stage's line ends the previous pass's bar: one line each
            reading.close()
            say(message)

        try:
            try:
                job = prepare_job(spec, stage, corpus_progress=reading)
            finally:
                reading.close()
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            if main_process:
                parser.print_usage(sys.stderr)
                print(f"{parser.prog}: error: {flag_names(str(exc))}", file=sys.stderr)
            return 2
        say(started(job))
        return train_with_progress(job.trainer, args, main_process, say, command)
    except DiskFault as fault:       # a full or read-only disk: its one sentence, no traceback
        say(fault.sentence(f"continue with {command} --resume {fault.folder}" if fault.kept is not None else None))
        return EXIT_DISK_FAULT
    finally:
        dist.cleanup()


class ReadingBar:
    """A tqdm bar (MB/s, ETA) following a corpus being read: counted, for the vocabulary, then tokenised.
    ``close()`` ends a pass (a stage's message closes it first): each pass is one bar, one line."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.bar = enabled, None

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm
        if self.bar is None or done < self.bar.n:        # a new pass over the corpus
            self.close()
            self.bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="reading the corpus",
                            dynamic_ncols=True, file=sys.stderr)
        self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def train_with_progress(trainer: Trainer, args: argparse.Namespace, main_process: bool,
                        say: Callable[[str], None], command: str) -> int:
    """``trainer.train`` with a tqdm bar (or a line per logged step); Ctrl-C saves a checkpoint.
    Returns 0 when finished, 130 when interrupted, 1 when the loss diverged."""
    from tqdm import tqdm

    config = trainer.config
    shown = task_definition(config.task).shown          # (metric, format) of the task's progress bar
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
    if result.status == TrainStatus.STOPPED:
        if trainer.global_step > 0 and (trainer.last_checkpoint is None
                                        or trainer.last_checkpoint.name != checkpoint_name(trainer.global_step)):
            path = trainer.save_checkpoint()
            say(f"saved {path}")
        say(f"stopped at step {trainer.global_step}; continue with: {command} --resume {trainer.run_dir}")
    else:
        lean = (" (the last keeps only the model, --keep-optimizer-state while-running: to train further, start a new "
                "run from it with --init-from)" if config.keep_optimizer_state == "while-running" else "")
        say(f"done: step {trainer.global_step}; checkpoints in {trainer.run_dir / 'checkpoints'}{lean}")
    if main_process:
        say(disk_note(trainer.run_dir, config.keep_last_checkpoints))
    if getattr(args, "debug_dump_weights", False):
        weights = {k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()}
        torch.save(weights, trainer.run_dir / f"weights-rank{dist.rank()}.pt")
    dist.barrier()
    interrupted = result.status == TrainStatus.STOPPED and not (stop_at is not None and trainer.global_step >= stop_at)
    return EXIT_INTERRUPTED if interrupted else 0


def disk_note(run_dir: Path, keep_last: int | None = None) -> str:
    """Two lines for the end of a run: what its folder takes on disk (how much of it is optimizer state)
    and how to keep less (``--keep-last``; the optimizer state is only needed to resume)."""
    sizes = [(path, file_size(path)) for path in Path(run_dir).rglob("*")]
    states = [size for path, size in sizes if path.name == STATE_FILE and path.is_file()]
    kept = (f"--keep-last {keep_last} kept only the newest {keep_last} checkpoint(s)" if keep_last is not None
            else "--keep-last N keeps only the newest N checkpoints")
    return (f"run folder {run_dir}: {megabytes(sum(size for _, size in sizes))} on disk, "
            f"{megabytes(sum(states))} of it optimizer state ({STATE_FILE} in {len(states)} checkpoint(s))\n"
            f"{kept}; a checkpoint's optimizer state ({STATE_FILE}) is only needed to resume")


def file_size(path: Path) -> int:
    """Bytes of the regular file ``path``; 0 for a folder, or a file gone or unreadable meanwhile."""
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


def megabytes(size: int) -> str:
    """``size`` bytes in decimal units: "262 MB", "4.5 MB" (one decimal below 10 MB), "12 kB" below 1 MB."""
    if size >= 9_950_000:
        return f"{size / 1e6:,.0f} MB"
    if size >= 999_500:
        return f"{size / 1e6:.1f} MB"
    return f"{size / 1e3:,.0f} kB"
