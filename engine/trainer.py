"""The pretraining loop: MLM (+ NSP) steps, held-out evaluation, checkpoints, exact resume.

``Trainer.step()`` runs one optimizer step over ``gradient_accumulation_steps``
micro-batches and returns its metrics; ``train()`` loops, evaluating, logging to
``<run_dir>/metrics.jsonl`` and checkpointing at the configured intervals, and asks
``should_stop()`` between steps (the worker pauses, stops and yields to interactive
requests through it). Nothing here prints: metrics are returned, passed to a
callback and appended to ``metrics.jsonl``.

Under torchrun (a process group of N > 1) the model is wrapped in DistributedDataParallel;
rank r reads micro-batch ``k * N + r`` of the shared, identically built dataset; losses are
weighted by the global masked-token and pair counts, so N processes compute the gradient
of the same union of micro-batches as one process would; only rank 0 logs and writes
checkpoints (the others wait at a barrier). See ``engine.distributed``.

Precision: bf16 autocast on CUDA, fp32 on CPU (``precision="auto"``); no loss scaling
is needed for bf16. A NaN/inf loss or gradient norm applies no update and raises
``TrainingDiverged``; checkpoints already written stay as they are.
"""
from __future__ import annotations

import contextlib
import hashlib
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from . import distributed as dist
from .checkpoints import load_directory
from .corpus import Document
from .heads import IGNORE_INDEX, BertWithHeads
from .optim import build_optimizer, build_scheduler, lr_factor
from .outputs import BertForwardOutput
from .pretraining_data import Batch, PretrainingDataset
from .tokenizer import WordPieceTokenizer
from .training_config import TrainingConfig
from .training_state import (
    CHECKPOINTS_DIR, METRICS_FILE, STATE_FORMAT, CheckpointInfo, append_metrics, capture_rng, checkpoint_name,
    list_checkpoints, prune_checkpoints, read_training_state, resolve_checkpoint, restore_rng, set_seed,
    truncate_metrics, write_checkpoint,
)

Callback = Callable[[str, dict[str, Any]], None]   # (kind: "train" | "eval" | "checkpoint" | "diverged", record)
# Config fields that may change when a run resumes; the rest define the run and must match.
RESUMABLE_OVERRIDES = frozenset({"total_steps", "eval_every", "eval_batches", "checkpoint_every",
                                 "keep_last_checkpoints", "log_every", "device", "precision"})


class TrainingDiverged(RuntimeError):
    """The loss or gradient norm became NaN/inf; no update was applied."""

    def __init__(self, message: str, step: int, last_checkpoint: Path | None) -> None:
        super().__init__(message)
        self.step, self.last_checkpoint = step, last_checkpoint


@dataclass
class TrainResult:
    """How ``Trainer.train`` ended: ``finished`` (total_steps reached), ``stopped`` (should_stop),
    or ``num_steps`` (the requested number of steps ran)."""

    status: str
    step: int
    metrics: dict[str, Any] | None


def build_datasets(train_documents: Sequence[Document], eval_documents: Sequence[Document] | None,
                   tokenizer: WordPieceTokenizer, config: TrainingConfig,
                   short_seq_prob: float = 0.1) -> tuple[PretrainingDataset, PretrainingDataset | None]:
    """Training and held-out datasets built with the config's batch size, length and masking."""
    def make(documents: Sequence[Document], seed: int) -> PretrainingDataset:
        return PretrainingDataset(documents, tokenizer, config.max_seq_length, config.batch_size,
                                  config.mlm_probability, short_seq_prob, config.nsp, config.whole_word_masking, seed)
    evaluation = make(eval_documents, config.seed + 1) if eval_documents else None
    return make(train_documents, config.seed), evaluation


class Trainer:
    """Pretrains a ``BertWithHeads`` (MLM head required; NSP head when ``config.nsp``)."""

    def __init__(self, model: BertWithHeads, tokenizer: WordPieceTokenizer | None, train_data: PretrainingDataset,
                 eval_data: PretrainingDataset | None, config: TrainingConfig, run_dir: str | Path) -> None:
        config.check_model(model.config)
        if "mlm" not in model.heads:
            raise ValueError("pretraining needs a model with a masked-LM head")
        if config.nsp and "nsp" not in model.heads:
            raise ValueError("next-sentence prediction is on but the model has no NSP head")
        _check_dataset(train_data, config, "training", check_batch=True)
        if eval_data is not None:
            _check_dataset(eval_data, config, "evaluation", check_batch=False)
        self.config, self.tokenizer = config, tokenizer
        self.train_data, self.eval_data = train_data, eval_data
        self.device = config.resolve_device()
        self.autocast_dtype = config.autocast_dtype(self.device)
        self.model = model.to(self.device).train()
        self.world, self.rank = dist.world_size(), dist.rank()
        self._compute = ("mlm", "nsp") if config.nsp else ("mlm",)
        unused = bool(set(model.heads) - set(self._compute)) or (model.has_pooler and not config.nsp)
        self._net = dist.wrap_model(self.model, self.device, find_unused_parameters=unused)   # DDP or the model
        self.optimizer = build_optimizer(model, config.learning_rate, config.weight_decay, config.adam_betas,
                                         config.adam_eps, self.device)
        self.scheduler = build_scheduler(self.optimizer, config.schedule, config.resolved_warmup_steps,
                                         config.total_steps)
        self._params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.run_dir = Path(run_dir)
        (self.run_dir / CHECKPOINTS_DIR).mkdir(parents=True, exist_ok=True)
        self.global_step = 0
        self.epoch, self.batch_index = 0, 0        # data position: the next micro-batch to read
        self.elapsed = 0.0                         # seconds spent in training steps, over all sessions
        self.last_checkpoint: Path | None = None
        self.last_metrics: dict[str, Any] | None = None
        self.last_eval: dict[str, Any] | None = None
        self._eval_batches: list[Batch] | None = None
        self._fingerprint: str | None = None
        set_seed(dist.rank_seed(config.seed))

    # ------------------------------------------------------------------ one step
    def step(self, micro_batches: Sequence[Batch] | None = None) -> dict[str, Any]:
        """One optimizer step over the next ``gradient_accumulation_steps`` micro-batches.

        ``micro_batches`` replaces the data (the position does not move). Losses are
        weighted by masked tokens (MLM) and pairs (NSP), so accumulating micro-batches
        gives the gradient of their union. Returns {step, mlm_loss, mlm_acc, nsp_loss,
        nsp_acc, loss, lr, grad_norm, tokens_per_s, elapsed}.
        """
        start = time.perf_counter()
        batches = list(micro_batches) if micro_batches is not None else [
            self._next_batch() for _ in range(self.config.gradient_accumulation_steps)]
        masked = [int((b.labels != IGNORE_INDEX).sum()) for b in batches]
        pairs = [int((b.next_sentence_label != IGNORE_INDEX).sum()) if self.config.nsp else 0 for b in batches]
        counts = dist.all_reduce_sum(torch.tensor(   # over all processes: DDP averages, so weights are n/global*N
            [sum(masked), sum(pairs), sum(b.num_tokens for b in batches)], dtype=torch.float64)).long().tolist()
        total_masked, total_pairs, tokens = max(1, counts[0]), max(1, counts[1]), counts[2]
        sums = torch.zeros(5, device=self.device)  # mlm loss*n, mlm correct, nsp loss*k, nsp correct, loss
        for i, (batch, n, k) in enumerate(zip(batches, masked, pairs)):
            with dist.no_sync(self._net, skip=i < len(batches) - 1):   # all-reduce on the last micro-batch
                out, targets, nsp_labels = self._forward(batch, self._net)
                loss = out.mlm_loss * (n / total_masked)
                if k:
                    loss = loss + out.nsp_loss * (k / total_pairs)
                (loss * self.world if self.world > 1 else loss).backward()
            sums += self._tally(out, targets, nsp_labels, n, k, loss)
        dist.all_reduce_sum(sums)
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        values = torch.cat((sums, grad_norm.detach().float().reshape(1))).tolist()   # the one sync
        if not all(map(_finite, values)):
            self.optimizer.zero_grad(set_to_none=True)
            self._diverged("loss" if not _finite(values[4]) else "gradient norm",
                           values[4] if not _finite(values[4]) else values[5])
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        duration = time.perf_counter() - start
        self.elapsed += duration
        nsp = self.config.nsp and counts[1] > 0
        self.last_metrics = {
            "step": self.global_step, "mlm_loss": values[0] / total_masked, "mlm_acc": values[1] / total_masked,
            "nsp_loss": values[2] / total_pairs if nsp else None, "nsp_acc": values[3] / total_pairs if nsp else None,
            "loss": values[4], "lr": lr, "grad_norm": values[5], "tokens_per_s": tokens / max(duration, 1e-9),
            "elapsed": self.elapsed,
        }
        return self.last_metrics

    def _forward(self, batch: Batch, net: torch.nn.Module | None = None,
                 ) -> tuple[BertForwardOutput, torch.Tensor, torch.Tensor]:
        """Move a batch to the device and run ``net`` (default: the bare model) under the configured precision."""
        batch = batch.to(self.device, non_blocking=True)
        inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                  "token_type_ids": batch.token_type_ids, "labels": batch.labels}
        if self.config.nsp:
            inputs["next_sentence_label"] = batch.next_sentence_label
        with self._autocast():
            out = (net or self.model)(**inputs, sparse_mlm=True, compute=self._compute)
        return out, batch.labels[batch.labels != IGNORE_INDEX], batch.next_sentence_label  # targets: (N,)

    @staticmethod
    def _tally(out: BertForwardOutput, targets: torch.Tensor, nsp_labels: torch.Tensor, n: int, k: int,
               loss: torch.Tensor) -> torch.Tensor:
        """(mlm loss * n, mlm correct, nsp loss * k, nsp correct, weighted loss) of one micro-batch."""
        with torch.no_grad():
            mlm_correct = (out.masked_logits.argmax(-1) == targets).sum().float()
            zero = torch.zeros((), device=loss.device)
            nsp_loss, nsp_correct = zero, zero
            if k:
                nsp_loss = out.nsp_loss.detach().float() * k
                nsp_correct = (out.seq_relationship_logits.argmax(-1) == nsp_labels).sum().float()
            return torch.stack((out.mlm_loss.detach().float() * n, mlm_correct, nsp_loss, nsp_correct,
                                loss.detach().float()))

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _next_batch(self) -> Batch:
        """The micro-batch at the data position, then advance it (into the next epoch when needed).
        With N processes it moves N batches and rank r reads the r-th; an epoch's last partial group is skipped."""
        while self.batch_index + self.world > self.train_data.num_batches(self.epoch):
            if self.train_data.num_batches(self.epoch) < self.world:
                raise ValueError("the corpus makes fewer instances than one batch per process; lower batch_size"
                                 + (" or use fewer processes" if self.world > 1 else ""))
            self.epoch, self.batch_index = self.epoch + 1, 0
        batch = self.train_data.batch(self.epoch, self.batch_index + self.rank)
        self.batch_index += self.world
        return batch

    def _diverged(self, what: str, value: float) -> None:
        step = self.global_step + 1
        where = (f"the last good checkpoint is {self.last_checkpoint.name}" if self.last_checkpoint is not None
                 else "no checkpoint was saved before it")
        raise TrainingDiverged(f"{what} became {value} at step {step}; the update was not applied and the run "
                               f"stopped; {where}. Try a lower learning rate or more warmup.",
                               step, self.last_checkpoint)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict[str, Any]:
        """MLM (and NSP) loss and accuracy on the held-out batches, with dropout off.

        The batches are the evaluation set's first ``eval_batches`` of epoch 0 with their
        seeded masks, the same at every call, so numbers compare across steps.
        """
        if self.eval_data is None:
            raise ValueError("this trainer has no held-out data to evaluate on")
        if self._eval_batches is None:
            count = self.eval_data.num_batches(0)
            count = min(count, self.config.eval_batches) if self.config.eval_batches else count
            self._eval_batches = [self.eval_data.batch(0, i) for i in range(count)]
        was_training = self.model.training
        self.model.eval()
        sums = torch.zeros(5, device=self.device)
        masked = pairs = 0
        try:
            with torch.no_grad():
                for batch in self._eval_batches:
                    n = int((batch.labels != IGNORE_INDEX).sum())
                    k = int((batch.next_sentence_label != IGNORE_INDEX).sum()) if self.config.nsp else 0
                    out, targets, nsp_labels = self._forward(batch)
                    sums += self._tally(out, targets, nsp_labels, n, k, out.mlm_loss)
                    masked, pairs = masked + n, pairs + k
        finally:
            self.model.train(was_training)
        values = sums.tolist()
        masked, nsp = max(1, masked), pairs > 0
        self.last_eval = {"step": self.global_step, "eval_mlm_loss": values[0] / masked,
                          "eval_mlm_acc": values[1] / masked,
                          "eval_nsp_loss": values[2] / pairs if nsp else None,
                          "eval_nsp_acc": values[3] / pairs if nsp else None}
        return self.last_eval

    # ------------------------------------------------------------------ the loop
    def train(self, num_steps: int | None = None, callback: Callback | None = None,
              should_stop: Callable[[], bool] | None = None) -> TrainResult:
        """Step until ``total_steps`` (or ``num_steps`` more), evaluating, logging and checkpointing.

        ``should_stop()`` is called before every step; it may block (to yield the CPU to an
        interactive request) and returns True to end the loop. ``callback(kind, record)``
        gets every logged record: ``train``, ``eval``, ``checkpoint`` and ``diverged``.
        At ``total_steps`` the run is evaluated and checkpointed whatever the intervals.
        """
        config = self.config
        target = config.total_steps if num_steps is None else min(config.total_steps, self.global_step + num_steps)
        while self.global_step < target:
            if should_stop is not None and should_stop():
                return TrainResult("stopped", self.global_step, self.last_metrics)
            try:
                metrics = self.step()
            except TrainingDiverged as exc:
                self._log("diverged", {"step": exc.step, "message": str(exc)}, callback)
                raise
            step, last = self.global_step, self.global_step == config.total_steps
            if last or step % config.log_every == 0:
                self._log("train", metrics, callback)
            if self.rank == 0 and self.eval_data is not None and (
                    last or (config.eval_every and step % config.eval_every == 0)):
                self._log("eval", self.evaluate(), callback)
            if last or (config.checkpoint_every and step % config.checkpoint_every == 0):
                path = self.save_checkpoint()
                if callback is not None and self.rank == 0:
                    callback("checkpoint", {"step": step, "path": str(path)})
        status = "finished" if self.global_step >= config.total_steps else "num_steps"
        return TrainResult(status, self.global_step, self.last_metrics)

    def _log(self, kind: str, record: dict[str, Any], callback: Callback | None) -> None:
        if self.rank != 0:
            return
        append_metrics(self.run_dir / METRICS_FILE, {"kind": kind, **record})
        if callback is not None:
            callback(kind, record)

    # ------------------------------------------------------------------ checkpoints
    def training_state(self) -> dict[str, Any]:
        """Everything needed to continue exactly: tensors and plain containers only."""
        return {"format": STATE_FORMAT, "step": self.global_step, "epoch": self.epoch,
                "batch_index": self.batch_index, "elapsed": self.elapsed,
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "rng": capture_rng(), "config": self.config.to_dict(),
                "param_names": [name for name, _ in self.model.named_parameters()],
                "data_fingerprint": self.data_fingerprint()}

    def save_checkpoint(self) -> Path:
        """Write ``run_dir/checkpoints/step-XXXXXX/`` atomically; prune to ``keep_last_checkpoints``.
        Under DDP only rank 0 writes; every rank returns after the write (a barrier)."""
        path = self.run_dir / CHECKPOINTS_DIR / checkpoint_name(self.global_step)
        if self.rank != 0:
            dist.barrier()
            self.last_checkpoint = path
            return path
        last_eval = self.last_eval if self.last_eval and self.last_eval["step"] == self.global_step else None
        info = {"step": self.global_step, "epoch": self.epoch, "metrics": self.last_metrics or {},
                "eval_metrics": last_eval, "created": time.time(), "config": self.config.to_dict()}
        write_checkpoint(self.model, self.tokenizer, path, self.training_state(), info)
        self.last_checkpoint = path
        prune_checkpoints(self.run_dir, self.config.keep_last_checkpoints)
        dist.barrier()
        return path

    def data_fingerprint(self) -> str:
        """A hash of the training data's token ids and sampling settings (checked on resume)."""
        if self._fingerprint is None:
            data, digest = self.train_data, hashlib.sha256()
            digest.update(repr((data.seed, data.batch_size, data.max_seq_length, data.mlm_probability,
                                data.short_seq_prob, data.nsp, data.whole_word, data.pad_to, data.drop_last,
                                data.vocab.vocab_size)).encode())
            for document in data.documents_token_ids:
                for sentence in document:
                    digest.update(array("q", sentence).tobytes() + b"|")
                digest.update(b"#")
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def load_training_state(self, state: dict[str, Any], checkpoint: Path | None = None) -> None:
        """Restore optimizer, scheduler, step, data position, elapsed time and RNG from ``state``."""
        names = [name for name, _ in self.model.named_parameters()]
        if list(state["param_names"]) != names:
            raise ValueError("the checkpoint's optimizer state belongs to a model with different parameters")
        self.optimizer.load_state_dict(state["optimizer"])
        fused = self.device.type == "cuda" or None
        for group in self.optimizer.param_groups:       # the kernel choice follows this machine
            group["fused"], group["foreach"] = fused, None
        self.scheduler.load_state_dict(state["scheduler"])
        step = self.scheduler.last_epoch                 # the lr follows this config (total_steps may change)
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * lr_factor(step, self.config.schedule, self.config.resolved_warmup_steps,
                                           self.config.total_steps)
        self.global_step, self.epoch = int(state["step"]), int(state["epoch"])
        self.batch_index = int(state["batch_index"])
        self.elapsed = float(state["elapsed"])
        self.last_checkpoint = checkpoint
        restore_rng(state["rng"])     # rank 0's; the other ranks get their own dropout stream
        if self.rank != 0:
            torch.manual_seed(dist.rank_seed(self.config.seed, self.global_step))

    @classmethod
    def resume(cls, source: str | Path, train_data: PretrainingDataset, eval_data: PretrainingDataset | None = None,
               run_dir: str | Path | None = None, check_data: bool = True, **overrides: Any) -> "Trainer":
        """Continue a run from a checkpoint directory or a run directory (its newest complete checkpoint).

        Loads weights, tokenizer, optimizer, scheduler, step, data position and RNG, so the
        next step is the one the uninterrupted run would have taken. ``overrides`` may change
        only ``RESUMABLE_OVERRIDES`` (e.g. a larger ``total_steps``); metrics.jsonl records
        after the checkpoint's step are dropped (they are about to be redone).
        """
        checkpoint = resolve_checkpoint(source)
        state = read_training_state(checkpoint)
        fixed = sorted(set(overrides) - RESUMABLE_OVERRIDES)
        if fixed:
            raise ValueError(f"cannot change {', '.join(fixed)} when resuming; only "
                             f"{', '.join(sorted(RESUMABLE_OVERRIDES))} may change")
        config = TrainingConfig.from_dict(state["config"]).replace(**overrides)
        loaded = load_directory(checkpoint, "cpu")
        run_dir = Path(run_dir) if run_dir is not None else checkpoint.parent.parent
        trainer = cls(loaded.model, loaded.tokenizer, train_data, eval_data, config, run_dir)
        if check_data and trainer.data_fingerprint() != state["data_fingerprint"]:
            raise ValueError("the training data differs from the data this run was trained on (corpus, "
                             "tokenizer, seed or batching); resuming would not continue the same run")
        trainer.load_training_state(state, checkpoint)
        if trainer.rank == 0:
            truncate_metrics(run_dir / METRICS_FILE, trainer.global_step)
        return trainer

    def checkpoints(self) -> list[CheckpointInfo]:
        """This run's complete checkpoints, newest first (``list_checkpoints``)."""
        return list_checkpoints(self.run_dir)


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


def _check_dataset(data: PretrainingDataset, config: TrainingConfig, name: str, check_batch: bool) -> None:
    """The dataset must have been built with the config's data settings (see ``build_datasets``)."""
    pairs = [("max_seq_length", data.max_seq_length, config.max_seq_length),
             ("mlm_probability", data.mlm_probability, config.mlm_probability),
             ("nsp", data.nsp, config.nsp), ("whole_word_masking", data.whole_word, config.whole_word_masking)]
    if check_batch:
        pairs.append(("batch_size", data.batch_size, config.batch_size))
    for field_name, theirs, ours in pairs:
        if theirs != ours:
            raise ValueError(f"the {name} data was built with {field_name}={theirs} but the training config says "
                             f"{ours}; build both from one config (engine.trainer.build_datasets)")
