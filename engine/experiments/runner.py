"""Run an experiment: each arm and seed an ordinary pretraining run folder, then its evaluation.

Layout under the experiments folder (``runs/experiments`` by default)::

    <experiment>/tokenizer/            the one WordPiece vocabulary every arm uses (trained once on the text)
    <experiment>/<arm>/seed-<k>/pretrain/          the arm's run (a run folder: curves, checkpoints, run.json)
    <experiment>/<arm>/seed-<k>/<metric>/          the fixed fine-tuning run that measures it
    <experiment>/<arm>/seed-<k>/results.json       the arm's numbers, written last (atomically)

Everything is resumable: a finished run is read, not redone; a pretraining run stopped part-way (Ctrl-C, a crash,
``kill -9``) continues from its newest checkpoint exactly (``resume_spec``: bit for bit), and a downstream run,
short, is redone from its start; so a rerun after a stop gives the same numbers as an uninterrupted one.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.checkpoints.hf_format import load
from engine.experiments.definitions import METRICS, Arm, Experiment, Scale
from engine.experiments.evaluation import DOWNSTREAM, downstream_accuracy, final_model, finished, masked_accuracy
from engine.text.builtin_corpus import builtin_corpus
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.tasks.pretraining import PRETRAINING

Say = Callable[[str], Any]
CORPUS = "shakespeare"


@dataclass(frozen=True)
class ArmResult:
    """One arm and seed, measured: ``metrics`` by ``METRICS`` key (None where it does not apply)."""

    arm: str
    seed: int
    metrics: dict[str, float | None]
    steps: int
    tokens_seen: int
    parameters: int


def seed_dir(root: Path, experiment: Experiment, arm: Arm, seed: int) -> Path:
    """Where one arm's seed keeps its runs and its numbers."""
    return root / experiment.name / arm.name / f"seed-{seed}"


def shared_tokenizer(root: Path, experiment: Experiment, scale: Scale, say: Say) -> Path:
    """The experiment's one vocabulary (trained on the pretraining text once, then read)."""
    folder = root / experiment.name / "tokenizer"
    if (folder / "tokenizer.json").is_file():
        return folder
    say(f"training a WordPiece vocabulary of {scale.vocab_size:,} pieces for every arm")
    documents = builtin_corpus(CORPUS, scale.max_documents)
    tokenizer = WordPieceTokenizer.train((sentence for doc in documents for sentence in doc), scale.vocab_size)
    partial = folder.with_name("tokenizer.partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer.save(partial)
    os.replace(partial, folder)                                  # whole or absent
    return folder


def pretraining_spec(arm: Arm, scale: Scale, seed: int, tokenizer: Path, run_dir: Path) -> JobSpec:
    """The arm's pretraining job: the scale's settings with the arm's changes."""
    training = TrainingConfig(task=PRETRAINING.name, learning_rate=scale.learning_rate, total_steps=scale.steps,
                              batch_size=scale.batch_size, max_seq_length=scale.seq_length,
                              eval_every=max(1, scale.steps // 10), eval_batches=10,
                              checkpoint_every=max(1, scale.steps // 4), checkpoint_every_s=60.0,
                              keep_last_checkpoints=2, seed=seed).replace(**dict(arm.training))
    return JobSpec(training, preset=scale.preset, corpus=CORPUS, max_documents=scale.max_documents,
                   eval_fraction=0.05, tokenizer=str(tokenizer), run_dir=str(run_dir),
                   task_settings=dict(arm.settings))


def pretrain(spec: JobSpec, run_dir: Path, say: Say) -> None:
    """Train the arm's run to its end: read when finished, continued from its newest checkpoint when stopped."""
    if finished(run_dir):
        return
    latest = RunFolder(run_dir).latest() if run_dir.is_dir() else None
    if latest is not None:
        say(f"continuing {run_dir} from step {latest.step}")
        spec = resume_spec(run_dir)
    elif run_dir.exists():                                       # stopped before its first checkpoint
        shutil.rmtree(run_dir)
    job = prepare_job(spec, say)
    assert job is not None                                       # no progress callback cancels it
    job.trainer.train()


def run_arm(root: Path, experiment: Experiment, arm: Arm, scale: Scale, seed: int, tokenizer: Path,
            say: Say) -> ArmResult:
    """Pretrain one arm with one seed, evaluate it, and keep its numbers (read back when already there)."""
    folder = seed_dir(root, experiment, arm, seed)
    kept = folder / "results.json"
    if kept.is_file():
        return ArmResult(**json.loads(kept.read_text(encoding="utf-8")))
    run_dir = folder / "pretrain"
    spec = pretraining_spec(arm, scale, seed, tokenizer, run_dir)
    say(f"{experiment.name} · {arm.name} · seed {seed}: pretraining {scale.steps:,} steps")
    pretrain(spec, run_dir, say)
    model = final_model(run_dir)
    metrics: dict[str, float | None] = {}
    causal = arm.settings.get("objective") == "clm"
    held_out = builtin_corpus(CORPUS, scale.max_documents + scale.eval_documents)[scale.max_documents:]
    loaded = load(model)
    metrics["masked_acc"] = None if causal else masked_accuracy(loaded, held_out, scale)
    for metric in DOWNSTREAM:
        say(f"{experiment.name} · {arm.name} · seed {seed}: {METRICS[metric]}")
        metrics[metric] = downstream_accuracy(metric, model, folder / metric, scale, seed)
    parameters = sum(p.numel() for p in loaded.model.parameters())
    result = ArmResult(arm.name, seed, metrics, scale.steps, scale.steps * scale.batch_size * scale.seq_length,
                       parameters)
    partial = kept.with_suffix(".partial")
    partial.write_text(json.dumps(asdict(result), indent=1), encoding="utf-8")
    os.replace(partial, kept)
    return result


def run_experiment(root: str | Path, experiment: Experiment, scale: Scale, say: Say = print,
                   arms: Sequence[str] | None = None) -> list[ArmResult]:
    """Every arm (or those named in ``arms``) with every seed of ``scale``, in order; the numbers of each."""
    root = Path(root)
    tokenizer = shared_tokenizer(root, experiment, scale, say)
    chosen = [arm for arm in experiment.arms if arms is None or arm.name in arms]
    return [run_arm(root, experiment, arm, scale, seed, tokenizer, say)
            for seed in range(scale.seeds) for arm in chosen]
