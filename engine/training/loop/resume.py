"""Continuing a run exactly: ``resume`` builds a ``Trainer`` from a run or checkpoint folder, and
``load_training_state`` puts a checkpoint's training state back into one.

The next step after a resume is the one the uninterrupted run would have taken: weights, tokenizer,
optimizer, scheduler, step, data position, elapsed training time and RNG all come from the checkpoint. Only
``RESUMABLE_FIELDS`` of the settings may change (``engine.training.runs.resume_rules``); the data must be the
run's own (its fingerprint is checked); ``metrics.jsonl`` records after the checkpoint's step are dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ContextManager, Sequence

import torch

from engine.checkpoints.hf_format import load_directory
from engine.training.loop import distributed as dist
from engine.training.loop.callbacks import TrainerCallback
from engine.training.loop.config import TrainingConfig
from engine.training.loop.optim import lr_factor
from engine.training.loop.trainer import Trainer
from engine.training.loop.training_task import TrainData, TrainingTask, restore_data_position
from engine.training.runs.resume_rules import check_resume_changes
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import (finished_lean_refusal, has_optimizer_state, is_finished_lean,
                                        read_training_state, restore_rng, truncate_metrics)


def resume(source: str | Path, task: TrainingTask, train_data: TrainData, eval_data: TrainData | None = None,
           run_dir: str | Path | None = None, check_data: bool = True,
           callbacks: Sequence[TrainerCallback] = (), lock: ContextManager[Any] | None = None,
           **overrides: Any) -> Trainer:
    """Continue a run from a checkpoint directory or a run directory (its newest complete checkpoint).

    ``task`` is the run's task object (made for the checkpoint's settings; its name must be theirs).
    ``overrides`` may change only ``RESUMABLE_FIELDS`` (e.g. a larger ``total_steps``); metrics.jsonl records
    after the checkpoint's step are dropped (they are about to be redone).
    """
    run, checkpoint = RunFolder.locate(source)
    state = read_training_state(checkpoint)
    check_optimizer_state(state, checkpoint, run.name)
    check_resume_changes(set(overrides))
    config = TrainingConfig.from_dict(state["config"]).replace(**overrides)
    loaded = load_directory(checkpoint, "cpu")
    run_dir = Path(run_dir) if run_dir is not None else run.root
    trainer = Trainer(loaded.model, loaded.tokenizer, train_data, eval_data, config, run_dir, callbacks, lock,
                      task=task)
    if check_data and trainer.data_fingerprint() != state["data_fingerprint"]:
        raise ValueError("the training data differs from the data this run was trained on (corpus, "
                         "tokenizer, seed, lengths or batching); resuming would not continue the same run")
    load_training_state(trainer, state, checkpoint)
    if trainer.rank == 0:
        truncate_metrics(trainer.run.metrics_path, trainer.global_step)
    return trainer


def check_optimizer_state(state: dict[str, Any], checkpoint: Path, run: str) -> None:
    """Refuse, with a sentence, a checkpoint of the run named ``run`` whose optimizer state was dropped: the last one
    of a finished lean run (``finished_lean_refusal``: start a new fine-tune from it) or an older one of its run."""
    if is_finished_lean(state):
        raise ValueError(finished_lean_refusal(run, checkpoint.name))
    if not has_optimizer_state(state):
        raise ValueError(f"{checkpoint.name} keeps no optimizer state (only a run's newest checkpoint does), so the "
                         f"run cannot continue exactly from it; resume from the run's newest checkpoint, or start a "
                         f"new run from this one with --init-from (fresh optimizer)")


def load_training_state(trainer: Trainer, state: dict[str, Any], checkpoint: Path | None = None) -> None:
    """Restore ``trainer``'s optimizer, scheduler, step, data position, elapsed time and RNG from ``state``."""
    check_optimizer_state(state, checkpoint or Path("the checkpoint"), trainer.run.name)
    names = [name for name, _ in trainer.model.named_parameters()]
    if list(state["param_names"]) != names:
        raise ValueError("the checkpoint's optimizer state belongs to a model with different parameters")
    optimizer, scheduler, config = trainer.optimizer, trainer.scheduler, trainer.config
    try:
        optimizer.load_state_dict(state["optimizer"])
    except ValueError:
        raise ValueError("the checkpoint's optimizer state covers other trainable parameters than this run "
                         "trains (frozen encoder or unused heads differ, or an older version wrote it); "
                         "start a new run from it with --init-from instead") from None
    fused = True if trainer.device.type in ("cpu", "cuda") else None   # as build_optimizer: the same kernel,
    for group in optimizer.param_groups:            # so a resumed step is bit-identical; it follows this machine
        group["fused"], group["foreach"] = fused, None
    scheduler.load_state_dict(state["scheduler"])
    step = scheduler.last_epoch                     # the lr follows this config (total_steps may change)
    for group, base in zip(optimizer.param_groups, scheduler.base_lrs):
        group["lr"] = base * lr_factor(step, config.schedule, config.resolved_warmup_steps, config.total_steps)
    trainer.global_step, trainer.epoch = int(state["step"]), int(state["epoch"])
    trainer.batch_index = int(state["batch_index"])
    restore_data_position(trainer.train_data, trainer.epoch, state.get("data_position"))
    trainer.elapsed = float(state["elapsed"])
    trainer.checkpoint_policy.saved(trainer.elapsed)
    trainer.last_checkpoint = checkpoint
    restore_rng(state["rng"])     # rank 0's; the other ranks get their own dropout stream
    if trainer.rank != 0:
        torch.manual_seed(dist.rank_seed(config.seed, trainer.global_step))
