"""A training process to SIGKILL, for tests/training/loop/test_faults.py.

Run as ``python tests/support/fault_child.py SETUP_JSON``. It imports torch and the engine once,
builds the datasets, prints ``ready``, then serves one JSON command per stdin line by
forking a child (cheap: no second torch import) that trains the tiny model with a
checkpoint after every step. The child prints ``child PID``, ``resumed STEP`` (or
``fresh 0``), ``train STEP`` and ``checkpoint STEP`` lines; with a ``phase`` it stops
dead at that moment of a checkpoint write (after its first ``arm_after`` checkpoints)
and prints ``frozen PHASE`` so the test can kill it there. When the child is gone this
process prints ``exited PID STATUS``.

Command fields: ``phase`` (a name in ``HOOKS``, ``"announce"`` to print ``staging NAME``
whenever a staging folder is made and go on, or ``"none"``), ``arm_after`` (complete
checkpoints before the hook fires), ``resume_from`` (a checkpoint, default: the run's
newest), ``steps`` (train this many steps and exit; default: until killed), ``run_dir``.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.checkpoints import hf_format as checkpoints  # noqa: E402
from engine.model.config import BertConfig  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from engine.training.loop.resume import resume  # noqa: E402
from engine.training.loop.trainer import Trainer  # noqa: E402
from engine.training.tasks import task_for  # noqa: E402
from engine.training.tasks.pretraining import build_datasets  # noqa: E402
from engine.training.loop.config import TrainingConfig  # noqa: E402
from engine.training.runs.state import STATE_FILE, truncate_metrics  # noqa: E402
from engine.training.runs.run_folder import METRICS_FILE, RunFolder

HOOKS = ("mkdtemp", "weights-torn", "weights", "config", "tokenizer", "state-torn", "unsynced", "synced",
         "renamed", "swap", "swapped", "prune")


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


class Freezer:
    """Wraps the functions a checkpoint write goes through; stops the process at one named moment."""

    def __init__(self, phase: str, arm_after: int) -> None:
        self.phase, self.left = phase, arm_after

    def at(self, phase: str) -> None:
        if phase == self.phase and self.left <= 0:
            say(f"frozen {phase}")
            while True:                       # the test SIGKILLs us here
                time.sleep(1)

    def install(self) -> None:
        real_mkdtemp, real_save_file, real_fsync_tree = tempfile.mkdtemp, checkpoints.save_file, checkpoints._fsync_tree
        real_config_save, real_tok_save, real_torch_save = checkpoints.save_config, WordPieceTokenizer.save, torch.save
        real_rename, real_rmtree = os.rename, shutil.rmtree

        def mkdtemp(*args, **kwargs):
            path = real_mkdtemp(*args, **kwargs)
            if self.phase == "announce" and self.left <= 0:
                say(f"staging {Path(path).name}")   # the test kills us a moment later, wherever we are
            self.at("mkdtemp")
            return path

        def save_file(tensors, filename, *args, **kwargs):
            real_save_file(tensors, filename, *args, **kwargs)
            if self.phase == "weights-torn" and self.left <= 0:
                os.truncate(filename, os.path.getsize(filename) // 2)   # as if killed mid-write
            self.at("weights-torn")
            self.at("weights")

        def config_save(config, directory):
            result = real_config_save(config, directory)
            self.at("config")
            return result

        def tok_save(tokenizer, directory):
            result = real_tok_save(tokenizer, directory)
            self.at("tokenizer")
            return result

        def torch_save(obj, f, *args, **kwargs):
            result = real_torch_save(obj, f, *args, **kwargs)
            name = f if isinstance(f, (str, Path)) else getattr(f, "name", "")   # a path, or a file written through
            if name and Path(name).name == STATE_FILE and self.phase == "state-torn" and self.left <= 0:
                if not isinstance(f, (str, Path)):
                    f.flush()
                os.truncate(name, os.path.getsize(name) // 2)
                self.at("state-torn")
            return result

        def fsync_tree(directory):
            self.at("unsynced")
            real_fsync_tree(directory)
            self.at("synced")

        def rename(src, dst, *args, **kwargs):
            real_rename(src, dst, *args, **kwargs)
            src, dst = Path(src), Path(dst)
            if ".old-" in dst.name:
                self.at("swap")                   # the old version moved away, the new one not yet in
            elif ".tmp-" in src.name:
                self.at("swapped" if any(".old-" in p for p in os.listdir(dst.parent)) else "renamed")

        def rmtree(path, *args, **kwargs):
            path = Path(path)
            if self.phase == "prune" and self.left <= 0 and path.is_dir() and path.parent.name == "checkpoints" \
                    and ".old-" not in path.name and ".tmp-" not in path.name:
                (path / "model.safetensors").unlink()   # half deleted
                self.at("prune")
            return real_rmtree(path, *args, **kwargs)

        tempfile.mkdtemp, checkpoints.save_file, checkpoints._fsync_tree = mkdtemp, save_file, fsync_tree
        checkpoints.save_config, WordPieceTokenizer.save, torch.save = config_save, tok_save, torch_save
        os.rename, shutil.rmtree = rename, rmtree


def child(setup: dict, command: dict, train, evaluation, tokenizer) -> None:
    run_dir = Path(command.get("run_dir") or setup["run_dir"])
    freezer = Freezer(command.get("phase", "none"), int(command.get("arm_after", 0)))
    freezer.install()
    source = command.get("resume_from") or (run_dir if RunFolder(run_dir).checkpoints() else None)
    if source is not None:
        trainer = resume(source, task_for(TrainingConfig(**setup["training"])), train, evaluation)
        say(f"resumed {trainer.global_step}")
    else:                                     # no complete checkpoint: start over (a killed first attempt logged some)
        truncate_metrics(run_dir / METRICS_FILE, 0)
        torch.manual_seed(0)
        model = BertWithHeads(BertConfig(**setup["model"]))
        config = TrainingConfig(**setup["training"])
        trainer = Trainer(model, tokenizer, train, evaluation, config, run_dir, task=task_for(config))
        say("fresh 0")

    def callback(kind: str, record: dict) -> None:
        if kind == "train":
            say(f"train {record['step']} {record['loss']!r}")
        elif kind == "checkpoint":
            freezer.left -= 1
            say(f"checkpoint {record['step']}")

    steps = command.get("steps")
    result = trainer.train(num_steps=steps, callback=callback)
    say(f"done {result.step}")


def warm_up(setup: dict, train, evaluation, tokenizer) -> None:
    """Train, save and resume once in a scratch folder, so forked children skip first-call costs."""
    with tempfile.TemporaryDirectory() as scratch:
        model = BertWithHeads(BertConfig(**setup["model"]))
        config = TrainingConfig(**setup["training"])
        trainer = Trainer(model, tokenizer, train, evaluation, config, scratch, task=task_for(config))
        trainer.train(num_steps=1)
        resume(scratch, task_for(config), train, evaluation).train(num_steps=1)
        RunFolder(scratch).checkpoints()


def main() -> None:
    setup = json.loads(Path(sys.argv[1]).read_text())
    tokenizer = WordPieceTokenizer.from_file(setup["tokenizer_dir"])
    docs = setup["documents"]
    train, evaluation = build_datasets(docs[:-2], docs[-2:], tokenizer, TrainingConfig(**setup["training"]))
    warm_up(setup, train, evaluation, tokenizer)
    say("ready")
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                say(f"child {os.getpid()}")
                child(setup, command, train, evaluation, tokenizer)
            except BaseException as exc:  # noqa: BLE001 - report, never fall back into the command loop
                say(f"error {type(exc).__name__}: {exc}")
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        say(f"exited {pid} {status}")


if __name__ == "__main__":
    main()
