"""The training loop: pretraining (MLM + NSP) and fine-tuning steps, evaluation, checkpoints, exact resume.

What is trained is a ``TrainingTask`` (``engine.training.loop.training_task``; the task objects live in
``engine.training.tasks``, and whoever builds the trainer hands it one): its heads, batch weighting, loss and
metrics; everything else is here and shared. Continuing a run is ``engine.training.loop.resume``; the held-out
evaluation is ``evaluation.py``, what older checkpoints keep after a save ``checkpoint_retention.py``.
``Trainer.step()`` runs one optimizer step over ``gradient_accumulation_steps`` micro-batches and returns its
metrics; ``train()`` loops, evaluating, logging to ``<run_dir>/metrics.jsonl`` and checkpointing at the configured
intervals. Code outside the loop sees and steers it through callbacks (``engine.training.loop.callbacks``:
should_stop, step, batch, evaluate, save, log; the worker pauses, stops and yields to interactive requests through
them) and through the ``lock`` the trainer holds around each step and evaluation. Nothing here prints: metrics are
returned, passed to the callbacks and appended to ``metrics.jsonl``.

Under torchrun (N > 1 processes) the model is wrapped in DistributedDataParallel; rank r reads micro-batch
``k * N + r`` of the identically built dataset; losses are weighted by the task's global counts, so N processes
compute the gradient one process would; only rank 0 logs and writes checkpoints. See
``engine.training.loop.distributed`` and docs/design/distributed.md.

Precision: bf16 autocast on CUDA, fp32 on CPU (``precision="auto"``); no loss scaling is needed for bf16. A NaN/inf
loss or gradient norm applies no update and raises ``TrainingDiverged`` (``divergence.py``); checkpoints already
written stay as they are. A checkpoint or ``metrics.jsonl`` write the disk refuses raises a ``DiskFault`` naming the
run folder, the step and the last good checkpoint (``engine.disk_faults.run_writes``). With ``config.freeze_encoder``
the embeddings and encoder layers get no gradient and are not given to the optimizer
(``engine.training.loop.freezing.freeze_encoder``); heads the task does not run, and an unused pooler, never are
(``freeze_unused``): they are saved as they came.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Sequence

import torch

from engine.disk_faults import make_folder, run_writes
from engine.training.loop import distributed as dist
from engine.training.loop.callbacks import CallbackList, FunctionCallback, TrainerCallback
from engine.training.loop.checkpoint_policy import CheckpointPolicy
from engine.training.loop.checkpoint_retention import ends_lean, keep_checkpoints
from engine.training.loop.divergence import TrainingDiverged, divergence
from engine.training.loop.evaluation import HeldOutEvaluation
from engine.model.heads import BertWithHeads
from engine.training.loop.optim import build_optimizer, build_scheduler
from engine.training.loop.train_result import TrainResult, TrainStatus
from engine.training.loop.freezing import freeze_encoder, freeze_unused
from engine.training.loop.training_task import (TaskOutput, TrainBatch, TrainData, TrainingTask, data_position,
                                                has_batches)
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import CheckpointInfo, RunFolder
from engine.training.runs.state import STATE_FORMAT, append_metrics, capture_rng, set_seed, write_checkpoint

Callback = Callable[[str, dict[str, Any]], None]   # (kind: "train" | "eval" | "checkpoint" | "diverged", record)


class Trainer:
    """Trains a ``BertWithHeads`` on ``config.task``: pretraining (MLM head required; NSP head when
    ``config.nsp``) on ``PretrainingDataset``s, or QA / classification on ``FeatureDataset``s.
    Heads the task does not use are carried along (and saved) unchanged."""

    def __init__(self, model: BertWithHeads, tokenizer: WordPieceTokenizer | None, train_data: TrainData,
                 eval_data: TrainData | None, config: TrainingConfig, run_dir: str | Path,
                 callbacks: Sequence[TrainerCallback] = (), lock: ContextManager[Any] | None = None,
                 clock: Callable[[], float] = time.perf_counter, *, task: TrainingTask) -> None:
        """``task`` is what is trained (``config.task`` names it; ``prepare_job`` makes it from the task's
        definition); ``callbacks`` see and steer the run (``engine.training.loop.callbacks``); ``lock`` is held
        around every step and evaluation, so whoever else takes it (a snapshot of the weights) sees no half step;
        ``clock`` times the steps (``elapsed``, tokens/s, checkpoints by time)."""
        config.check_model(model.config)
        if task.name != config.task:
            raise ValueError(f"the task to train is {task.name!r} but the settings are for {config.task!r}")
        self.task = task
        self.task.check(model, train_data, eval_data, config)
        self.config, self.tokenizer = config, tokenizer
        self.train_data, self.eval_data = train_data, eval_data
        self.device = config.resolve_device()
        self.autocast_dtype = config.autocast_dtype(self.device)
        self._compute = self.task.heads(config)
        if config.freeze_encoder:
            freeze_encoder(model)
        freeze_unused(model, self._compute, self.task.uses_pooler(config))   # every trainable parameter is used
        self.model = model.to(self.device).train()
        self.world, self.rank = dist.world_size(), dist.rank()
        self._net = dist.wrap_model(self.model, self.device)   # DDP or the model
        self.optimizer = build_optimizer(model, config.learning_rate, config.weight_decay, config.adam_betas,
                                         config.adam_eps, self.device)
        self.scheduler = build_scheduler(self.optimizer, config.schedule, config.resolved_warmup_steps,
                                         config.total_steps)
        self._params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.run_dir = Path(run_dir)
        self.run = RunFolder(run_dir)
        make_folder(self.run.checkpoints_dir)
        self.global_step = 0
        self.epoch, self.batch_index = 0, 0        # data position: the next micro-batch to read
        self.elapsed = 0.0                         # seconds spent in training steps, over all sessions
        self.clock = clock
        self.checkpoint_policy = CheckpointPolicy(config.checkpoint_every, config.checkpoint_every_s)
        self.last_checkpoint: Path | None = None
        self.last_metrics: dict[str, Any] | None = None
        self.last_eval: dict[str, Any] | None = None
        self._held_out: HeldOutEvaluation | None = None     # made at the first evaluation
        self._fingerprint: str | None = None
        self.callbacks = CallbackList(callbacks)
        self.lock: ContextManager[Any] = lock if lock is not None else contextlib.nullcontext()
        set_seed(dist.rank_seed(config.seed))

    def add_callback(self, callback: TrainerCallback) -> None:
        """Register a callback (called after the ones already there)."""
        self.callbacks.add(callback)

    # ------------------------------------------------------------------ one step
    def step(self, micro_batches: Sequence[TrainBatch] | None = None) -> dict[str, Any]:
        """One optimizer step over the next ``gradient_accumulation_steps`` micro-batches.

        ``micro_batches`` replaces the data (the position does not move). Each loss term is
        weighted by its count in the micro-batch over the step's total (masked tokens for MLM,
        pairs for NSP, features for QA and classification), so accumulating micro-batches gives
        the gradient of their union. Returns {step, <the task's metrics>, loss, lr, grad_norm,
        tokens_per_s, elapsed}; pretraining's are mlm_loss, mlm_acc, nsp_loss, nsp_acc. Holds ``lock``.
        """
        with self.lock:
            return self._step(micro_batches)

    def _step(self, micro_batches: Sequence[TrainBatch] | None) -> dict[str, Any]:
        start = self.clock()
        batches = list(micro_batches) if micro_batches is not None else [
            self._next_batch() for _ in range(self.config.gradient_accumulation_steps)]
        counts = [self.task.counts(b) for b in batches]                  # per micro-batch, per loss term
        terms = len(counts[0])
        local = [sum(c[t] for c in counts) for t in range(terms)] + [sum(b.num_tokens for b in batches)]
        reduced = dist.all_reduce_sum(   # over all processes: DDP averages, so weights are n/global*N
            torch.tensor(local, dtype=torch.float64)).long().tolist()
        totals, tokens = reduced[:terms], reduced[terms]
        denominators = [max(1, t) for t in totals]
        stats = len(self.task.stat_names)
        sums = torch.zeros(stats + 1, device=self.device)                 # the task's sums, then the loss
        for i, (batch, c) in enumerate(zip(batches, counts)):
            with dist.no_sync(self._net, skip=i < len(batches) - 1):   # all-reduce on the last micro-batch
                batch, out = self._forward(batch, self._net)
                term_losses = self.task.losses(out)
                loss = term_losses[0] * (c[0] / denominators[0])
                for term, n, total in zip(term_losses[1:], c[1:], denominators[1:]):
                    if n:
                        loss = loss + term * (n / total)
                (loss * self.world if self.world > 1 else loss).backward()
            sums += torch.cat((self.task.tally(out, batch, c), loss.detach().float().reshape(1)))
        dist.all_reduce_sum(sums)
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        values = torch.cat((sums, grad_norm.detach().float().reshape(1))).tolist()   # the one sync
        loss_value, norm_value = values[stats], values[stats + 1]
        error = divergence(values, loss_value, norm_value, self.global_step + 1, self.last_checkpoint)
        if error is not None:
            self.optimizer.zero_grad(set_to_none=True)
            raise error
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        duration = self.clock() - start
        self.elapsed += duration
        self.last_metrics = {
            "step": self.global_step, **self.task.metrics(values[:stats], totals), "loss": loss_value, "lr": lr,
            "grad_norm": norm_value, "tokens_per_s": tokens / max(duration, 1e-9), "elapsed": self.elapsed,
        }
        return self.last_metrics

    def _forward(self, batch: TrainBatch, net: torch.nn.Module | None = None,
                 ) -> tuple[TrainBatch, TaskOutput]:
        """Move a batch to the device and run ``net`` (default: the bare model) under the configured precision."""
        batch = batch.to(self.device, non_blocking=True)
        with self._autocast():
            return batch, self.task.forward(net or self.model, batch, self.config)

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _next_batch(self) -> TrainBatch:
        """The micro-batch at the data position, then advance it (into the next epoch when needed).
        With N processes it moves N batches and rank r reads the r-th; an epoch's last partial group is skipped."""
        while not has_batches(self.train_data, self.epoch, self.batch_index + self.world):
            if not has_batches(self.train_data, self.epoch, self.world):
                raise ValueError("the training data makes fewer examples than one batch per process; lower batch_size"
                                 + (" or use fewer processes" if self.world > 1 else ""))
            self.epoch, self.batch_index = self.epoch + 1, 0
        batch = self.train_data.batch(self.epoch, self.batch_index + self.rank)
        self.batch_index += self.world
        self.callbacks.call("on_batch", self, batch)
        return batch

    # ------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict[str, Any]:
        """The task's metrics on the held-out batches, with dropout off, named ``eval_<metric>``
        (pretraining: eval_mlm_loss, eval_mlm_acc, eval_nsp_loss, eval_nsp_acc).

        The batches are the evaluation set's first ``eval_batches`` of epoch 0 (with their
        seeded masks for pretraining), the same at every call, so numbers compare across steps. Holds ``lock``.
        """
        with self.lock:
            return self._evaluate()

    def _evaluate(self) -> dict[str, Any]:
        if self.eval_data is None:
            raise ValueError("this trainer has no held-out data to evaluate on")
        if self._held_out is None:
            self._held_out = HeldOutEvaluation(self.task, self.eval_data, self.config.eval_batches)
        metrics = self._held_out.metrics(self.model, self.tokenizer, self._forward, self.device)
        self.last_eval = {"step": self.global_step, **{f"eval_{k}": v for k, v in metrics.items()}}
        return self.last_eval

    # ------------------------------------------------------------------ the loop
    def train(self, num_steps: int | None = None, callback: Callback | None = None,
              should_stop: Callable[[], bool] | None = None) -> TrainResult:
        """Step until ``total_steps`` (or ``num_steps`` more), evaluating, logging and checkpointing.

        Before every step the callbacks' ``should_stop`` is asked (it may block, e.g. while paused);
        after it ``on_step_end``, ``on_log`` for every record written to ``metrics.jsonl``; ``on_train_end`` last.
        ``callback(kind, record)`` and ``should_stop()`` are a shorthand for a ``FunctionCallback``
        registered for this call. At ``total_steps`` the run is evaluated and checkpointed whatever
        the intervals.
        """
        extra = FunctionCallback(callback, should_stop) if callback is not None or should_stop is not None else None
        if extra is not None:
            self.callbacks.add(extra)
        try:
            return self._loop(num_steps)
        finally:
            self.callbacks.call("on_train_end", self)
            if extra is not None:
                self.callbacks.remove(extra)

    def _loop(self, num_steps: int | None) -> TrainResult:
        config = self.config
        target = config.total_steps if num_steps is None else min(config.total_steps, self.global_step + num_steps)
        while self.global_step < target:
            if self.callbacks.should_stop(self):
                return TrainResult(TrainStatus.STOPPED, self.global_step, self.last_metrics)
            self.callbacks.call("on_step_begin", self)
            try:
                metrics = self.step()
            except TrainingDiverged as exc:
                self._log("diverged", {"step": exc.step, "message": str(exc)})
                raise
            self.callbacks.call("on_step_end", self, metrics)
            step, last = self.global_step, self.global_step == config.total_steps
            if last or step % config.log_every == 0:
                self._log("train", metrics)
            if self.rank == 0 and self.eval_data is not None and (
                    last or (config.eval_every and step % config.eval_every == 0)):
                evaluation = self.evaluate()
                self.callbacks.call("on_evaluate", self, evaluation)
                self._log("eval", evaluation)
            if last or self.checkpoint_policy.due(step, self.elapsed, self.device):
                self.save_checkpoint(for_time=not last and not self.checkpoint_policy.by_steps(step))
        status = TrainStatus.FINISHED if self.global_step >= config.total_steps else TrainStatus.NUM_STEPS
        return TrainResult(status, self.global_step, self.last_metrics)

    def _log(self, kind: str, record: dict[str, Any]) -> None:
        """Append a record to ``metrics.jsonl`` and hand it to the callbacks (main process only)."""
        if self.rank != 0:
            return
        with run_writes(self.run_dir, "appending to metrics.jsonl", self.global_step, self.last_checkpoint):
            append_metrics(self.run.metrics_path, {"kind": kind, **record})
        self.callbacks.call("on_log", self, kind, record)

    # ------------------------------------------------------------------ checkpoints
    def training_state(self, lean: bool = False) -> dict[str, Any]:
        """Everything needed to continue exactly (``lean``: but the optimizer and scheduler); plain values only."""
        optimizer = {} if lean else {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        return {"format": STATE_FORMAT, "step": self.global_step, "epoch": self.epoch,
                "batch_index": self.batch_index, "elapsed": self.elapsed,
                "data_position": data_position(self.train_data, self.epoch), **optimizer,
                "rng": capture_rng(), "config": self.config.to_dict(),
                "param_names": [name for name, _ in self.model.named_parameters()],
                "data_fingerprint": self.data_fingerprint()}

    def save_checkpoint(self, for_time: bool = False) -> Path:
        """Write ``run_dir/checkpoints/step-XXXXXX/`` atomically (under "while-running" the one at ``total_steps``
        without optimizer and scheduler state, its weights in ``config.final_dtype``), then trim what the older ones keep (``keep_checkpoints``: the newest
        N, one saved for time, the optimizer state). Under DDP only rank 0 writes; every rank returns after it."""
        path = self.run.checkpoint_dir(self.global_step)
        if self.rank != 0:
            dist.barrier()
            self.last_checkpoint = path
            self.checkpoint_policy.saved(self.elapsed)
            return path
        last_eval = self.last_eval if self.last_eval and self.last_eval["step"] == self.global_step else None
        info = {"step": self.global_step, "epoch": self.epoch, "metrics": self.last_metrics or {},
                "eval_metrics": last_eval, "created": time.time(), "config": self.config.to_dict()}
        finished = ends_lean(self.config, self.global_step)
        with run_writes(self.run_dir, f"writing the checkpoint of step {self.global_step}", self.global_step,
                        self.last_checkpoint):      # the step being saved; the last good checkpoint is kept
            write_checkpoint(self.model, self.tokenizer, path, self.training_state(lean=finished), info,
                             dtype=self.config.final_weights_dtype() if finished else torch.float32)
        self.last_checkpoint = path
        keep_checkpoints(self.run, path, self.checkpoint_policy.saved(self.elapsed, path, for_time), self.config)
        dist.barrier()
        self.callbacks.call("on_save", self, path)
        return path

    def data_fingerprint(self) -> str:
        """A hash of the training data's token ids and sampling settings (checked on resume)."""
        if self._fingerprint is None:
            self._fingerprint = self.task.fingerprint(self.train_data)
        return self._fingerprint

    def checkpoints(self) -> list[CheckpointInfo]:
        """This run's complete checkpoints, newest first."""
        return self.run.checkpoints()

