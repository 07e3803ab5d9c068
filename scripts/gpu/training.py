"""The training stage: the default model trained further with the joint recipe (task ``qa_mlm``: every step one
SQuAD batch and one Wikipedia masked-LM + NSP batch, as ``scripts/train_default_model.sh`` step 11) on the
unpacked data, until the stage's deadline.

The carried data is small and is seen many times, so the stage keeps the best model, not the last: every
``eval_every_s`` seconds it scores the model on the fixed held-out sample (``scripts.gpu.heldout``); a score is
better when masked-token top-1 rises while SQuAD F1 stays within ``qa_tolerance`` points of the start model's;
the best weights are copied to the CPU; after ``patience`` scores without a better one the stage stops early.
The learning rate warms up and then falls as the inverse square root (a schedule that needs no step count,
since time, not steps, ends the run).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from engine.data.token_cache import CACHE_ENV
from engine.training.jobs.setup import prepare_job
from engine.training.tasks.job_spec import JobSpec
from engine.training.loop.callbacks import TrainerCallback
from engine.training.loop.divergence import TrainingDiverged
from engine.training.loop.trainer import Trainer
from engine.training.tasks.qa_with_mlm import QA_MLM
from scripts.gpu import heldout
from scripts.gpu.pack import UnpackedPack

NO_STEP_LIMIT = 10_000_000      # time ends the run; the schedule does not depend on it (inverse_sqrt)


@dataclass
class Recipe:
    """The stage's settings; the defaults are chosen for one large GPU (``--cpu-recipe`` shrinks them)."""

    init_from: str = "default"
    batch_size: int = 16             # SQuAD windows of seq_len per step
    mlm_batch_size: int = 256        # Wikipedia sequences of mlm_seq_len per step
    seq_len: int = 256
    mlm_seq_len: int = 128
    doc_stride: int = 128
    learning_rate: float = 2e-4
    warmup_steps: int = 300
    eval_every_s: float = 60.0
    patience: int = 3
    qa_tolerance: float = 1.0        # SQuAD F1 points a better model may lose against the start model
    mlm_tokens: int = 2000           # masked tokens scored at each evaluation
    squad_questions: int = 200       # held-out questions answered at each evaluation
    device: str = "auto"
    seed: int = 0


class KeepBest(TrainerCallback):
    """Scores the model by time, keeps the best weights on the CPU, stops at the deadline or when no score has
    been better for ``patience`` evaluations. Writes every logged train record and every score to ``metrics``."""

    def __init__(self, recipe: Recipe, sample: heldout.Sample, deadline: float, metrics: Path,
                 log: Callable[[str], None]) -> None:
        self.recipe, self.sample, self.deadline, self.log = recipe, sample, deadline, log
        self.metrics = metrics.open("a", encoding="utf-8")
        self.started = time.monotonic()
        self.next_eval = self.started + recipe.eval_every_s
        self.eval_seconds = 0.0
        self.start: dict[str, Any] = {}
        self.best: dict[str, Any] = {}
        self.best_state: dict[str, torch.Tensor] | None = None
        self.scores: list[dict[str, Any]] = []
        self.since_best = 0
        self.stop_reason: str | None = None
        self.last_train: dict[str, Any] = {}

    def write(self, kind: str, record: dict[str, Any]) -> None:
        self.metrics.write(json.dumps({"kind": kind, "t": round(time.monotonic() - self.started, 2), **record}) + "\n")
        self.metrics.flush()

    def evaluate(self, trainer: Trainer) -> None:
        """Score the model now; keep it when it is the best so far."""
        scores = {"step": trainer.global_step, **heldout.score(trainer.model, trainer.tokenizer, self.sample)}
        self.eval_seconds = scores["seconds"]
        self.scores.append(scores)
        if not self.start:
            self.start = self.best = scores
            self.best_state = self.copy_weights(trainer)
            note = "start model"
        elif self.better(scores):
            self.best, self.since_best = scores, 0
            self.best_state = self.copy_weights(trainer)
            note = "best so far, kept"
        else:
            self.since_best += 1
            note = f"not better ({self.since_best} of {self.recipe.patience})"
        self.write("heldout", {**scores, "note": note})
        self.log(f"step {trainer.global_step}: {heldout.describe(scores)} [{scores['seconds']:.1f} s]: {note}")
        self.next_eval = time.monotonic() + self.recipe.eval_every_s

    @staticmethod
    def copy_weights(trainer: Trainer) -> dict[str, torch.Tensor]:
        return {k: v.detach().to("cpu", copy=True) for k, v in trainer.model.state_dict().items()}

    def better(self, scores: dict[str, Any]) -> bool:
        if scores.get("top1", 0.0) <= self.best.get("top1", 0.0):
            return False
        return "f1" not in self.start or scores.get("f1", 0.0) >= self.start["f1"] - self.recipe.qa_tolerance

    def should_stop(self, trainer: Trainer) -> bool:
        if self.stop_reason is None and self.since_best >= self.recipe.patience:
            self.stop_reason = f"no better held-out score in {self.recipe.patience} evaluations"
        if self.stop_reason is None and time.monotonic() + 1.2 * self.eval_seconds + 1.0 >= self.deadline:
            if self.scores and self.scores[-1]["step"] != trainer.global_step:
                self.evaluate(trainer)               # the last steps get their score too
            self.stop_reason = "the stage's time is up"
        return self.stop_reason is not None

    def on_step_end(self, trainer: Trainer, metrics: dict[str, Any]) -> None:
        self.last_train = metrics
        if time.monotonic() >= self.next_eval:
            self.evaluate(trainer)

    def on_log(self, trainer: Trainer, kind: str, record: dict[str, Any]) -> None:
        if kind == "train":
            self.write("train", record)

    def on_train_end(self, trainer: Trainer) -> None:
        self.metrics.flush()


def job_spec(recipe: Recipe, data: UnpackedPack, run_dir: Path) -> JobSpec:
    """The ``qa_mlm`` job of the recipe on the unpacked data (1% of the SQuAD questions held out for the
    trainer's own bookkeeping; the stage scores on the pack's held-out sample)."""
    training = dict(task=QA_MLM.name, batch_size=recipe.batch_size, max_seq_length=recipe.seq_len,
                    learning_rate=recipe.learning_rate, warmup_steps=recipe.warmup_steps, total_steps=NO_STEP_LIMIT,
                    schedule="inverse_sqrt", eval_every=0, eval_batches=1, checkpoint_every=0, checkpoint_every_s=0,
                    log_every=10, seed=recipe.seed, device=recipe.device, precision="auto")
    return JobSpec(training, init_from=recipe.init_from, data=str(data.squad_train), eval_fraction=0.01,
                   task_settings=dict(doc_stride=recipe.doc_stride, mlm_corpus=str(data.wiki_train),
                                      mlm_seq_len=recipe.mlm_seq_len, mlm_batch_size=recipe.mlm_batch_size),
                   run_dir=str(run_dir))


def train(recipe: Recipe, data: UnpackedPack, work: Path, metrics: Path, deadline: float,
          log: Callable[[str], None]) -> tuple[Trainer | None, KeepBest | None, dict[str, Any]]:
    """Prepare the job, score the start model, train until the deadline or early stop, put the best weights back
    into the model (moved to the CPU). Returns (trainer, its KeepBest, a summary); (None, None, summary) when
    the job could not be prepared in time."""
    os.environ[CACHE_ENV] = str(work / "cache")
    last = [0.0]

    def progress(message: str) -> bool:
        if time.monotonic() - last[0] > 5 or not message.startswith("reading"):
            log(f"preparing: {message}")
            last[0] = time.monotonic()
        return time.monotonic() < deadline

    prepared_at = time.monotonic()
    job = prepare_job(job_spec(recipe, data, work / "run"), progress)
    if job is None:
        return None, None, {"stopped": "out of time while preparing the data"}
    trainer = job.trainer
    log(f"prepared in {time.monotonic() - prepared_at:.0f} s: {len(trainer.train_data)} SQuAD windows, "
        f"{trainer.train_data.pretraining.num_documents} Wikipedia documents, device {trainer.device}, "
        f"precision {trainer.autocast_dtype or 'fp32'}")
    sample = heldout.Sample(data.heldout_paragraphs, data.heldout_questions[:recipe.squad_questions],
                            recipe.mlm_tokens, recipe.seed)
    keeper = KeepBest(recipe, sample, deadline, metrics, log)
    keeper.evaluate(trainer)
    trainer.add_callback(keeper)
    training_started = time.monotonic()
    try:
        trainer.train()
    except TrainingDiverged as exc:
        keeper.stop_reason = f"diverged: {exc}"
    seconds = time.monotonic() - training_started
    if keeper.best_state is not None:
        trainer.model.load_state_dict(keeper.best_state)
    trainer.model.to("cpu").eval()
    summary = {"recipe": asdict(recipe), "steps": trainer.global_step, "training_seconds": round(seconds, 1),
               "steps_per_s": round(trainer.global_step / max(seconds, 1e-9), 2),
               "tokens_per_s": keeper.last_train.get("tokens_per_s"), "stopped": keeper.stop_reason,
               "start": keeper.start, "best": keeper.best, "improved": keeper.best.get("step") != keeper.start.get("step"),
               "evaluations": len(keeper.scores)}
    return trainer, keeper, summary
