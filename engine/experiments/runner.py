"""Run an experiment: each arm and seed an ordinary pretraining run folder, then its evaluation.

Layout under the experiments folder (``runs/experiments`` by default)::

    <experiment>/<scale>/tokenizer/                  the one vocabulary every arm uses (trained once on the text)
    <experiment>/<scale>/<arm>/seed-<k>/pretrain/    the arm's run (a run folder: curves, checkpoints, run.json)
    <experiment>/<scale>/<arm>/seed-<k>/<metric>/    the fixed fine-tuning run that measures it
    <experiment>/<scale>/<arm>/seed-<k>/<metric>-step-<n>/   the same from the checkpoint of step n (``measure_at``)
    <experiment>/<scale>/<arm>/seed-<k>/results.json the arm's numbers, written last (atomically)

``<scale>`` names the scale (``tiny-600-steps-1a2b3c4d``: every setting but the seeds), so another scale is
another folder. Arms whose pretraining is the same (they differ only in how the model is used: ``Arm.features``)
share one run per seed, the first such arm's ``pretrain/`` (``pretraining_owner``); the others keep only their
numbers and measurements.

The syntax metrics (``syntax_metrics``: the Syntax tab's best heads and layer probe) need no run of their own; arms
that share a pretraining run copy its owner's (one model, one measurement). A results.json written before they
existed is still read: the missing ones are measured on the arm's final model when its pretraining run is there
(and the file rewritten), else left missing (shown as —); so are the fine-tuned and frozen-feature metrics an
experiment asks for after its results.json was written (``with_measured``: the named-entity F1 of Tables 7 and 8).

Everything is resumable: a finished run is read, not redone; a pretraining run stopped part-way (Ctrl-C, a crash,
``kill -9``) continues from its newest checkpoint exactly (``resume_spec``: bit for bit), and a downstream run,
short, is redone from its start; so a rerun after a stop gives the same numbers as an uninterrupted one.
``should_stop`` (the app's Stop) is asked between pretraining steps and between arms: a pretraining run it stops
saves a checkpoint at the step it reached, and ``ExperimentStopped`` is raised; run again, it continues from there.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine import regular_files
from engine.checkpoints.hf_format import load
from engine.experiments.definitions import METRICS, Arm, Experiment, Scale
from engine.experiments.evaluation import (DOWNSTREAM, FEATURES_OF_ANY_ARM, applies, final_model, finished,
                                          masked_accuracy, measure)
from engine.experiments.series import measure_series, pretraining_changes
from engine.experiments.syntax_metrics import SYNTAX_METRICS, read_details, syntax_measures
from engine.experiments.token_budget import arm_batch_size
from engine.model.loaded_model import LoadedModel
from engine.text.builtin_corpus import builtin_corpus
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.loop.train_result import TrainStatus
from engine.training.runs.run_folder import RunFolder, checkpoint_name
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.tasks.pretraining import PRETRAINING

Say = Callable[[str], Any]
ShouldStop = Callable[[], bool]
CORPUS = "shakespeare"
RESULTS_BYTES = 1 << 20    # a results.json is a few hundred bytes


class ExperimentStopped(Exception):
    """``should_stop`` said so: the experiment stopped between steps or arms (run it again to continue)."""


@dataclass(frozen=True)
class ArmResult:
    """One arm and seed, measured: ``metrics`` by ``METRICS`` key (None where it does not apply, absent where it was
    never measured); ``series`` by metric, pretraining step -> value (the experiment's ``measure_at`` checkpoints;
    empty without); ``details``, what the syntax metrics rest on (``SyntaxMeasures.details``: best head per
    relation as [layer, head], the probe's best layer)."""

    arm: str
    seed: int
    metrics: dict[str, float | None]
    steps: int
    tokens_seen: int
    parameters: int
    series: dict[str, dict[int, float]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


ADDED_AT_DEFAULT = {"feature_classifier": "logistic"}   # Scale fields added later: at these values left out of
                                                      # the hash, so folders made before them are found again


def scale_key(scale: Scale, revision: int = 0) -> str:
    """The folder of one scale's runs: ``tiny-600-steps-<hash of every setting but the seeds>``, so a quick run's
    numbers are never read back as a default run's (more seeds of the same scale add to the same folder); an
    experiment's ``revision`` above 0 is hashed too."""
    settings = {k: v for k, v in sorted(asdict(scale).items())
                if k != "seeds" and not (k in ADDED_AT_DEFAULT and v == ADDED_AT_DEFAULT[k])}
    if revision:
        settings["revision"] = revision
    if scale.feature_classifier == "bilstm":             # its sums' layer weights are learned (LayerMix) since
        settings["bilstm_learns_layer_weights"] = True   # 6 Dec 2026: a folder of the equal weights is not read back
    digest = hashlib.sha256(json.dumps(settings).encode("utf-8")).hexdigest()[:8]
    return f"{scale.preset}-{scale.steps}-steps-{digest}"


def experiment_dir(root: Path, experiment: Experiment, scale: Scale) -> Path:
    """Where an experiment keeps everything of one scale: its vocabulary and each arm's seeds."""
    return Path(root) / experiment.name / scale_key(scale, experiment.revision)


def seed_dir(root: Path, experiment: Experiment, arm: Arm, seed: int, scale: Scale) -> Path:
    """Where one arm's seed keeps its runs and its numbers, at ``scale``."""
    return experiment_dir(root, experiment, scale) / arm.name / f"seed-{seed}"


def _pretraining_of(arm: Arm) -> str:
    """Everything of an arm but its name, label, paper numbers and feature recipe: what its pretraining is."""
    fields = {k: v for k, v in asdict(arm).items() if k not in ("name", "label", "paper", "features")}
    return json.dumps(fields, sort_keys=True, default=str)


def pretraining_owner(experiment: Experiment, arm: Arm) -> Arm:
    """The first arm of ``experiment`` whose pretraining is ``arm``'s (``arm`` itself unless an earlier one is the
    same): the arm whose folder holds the run they share."""
    mine = _pretraining_of(arm)
    return next(other for other in experiment.arms if _pretraining_of(other) == mine)


def pretrain_dir(root: Path, experiment: Experiment, arm: Arm, seed: int, scale: Scale) -> Path:
    """The pretraining run ``arm`` uses for ``seed`` (shared with the arms of the same pretraining)."""
    return seed_dir(root, experiment, pretraining_owner(experiment, arm), seed, scale) / "pretrain"


def read_result(folder: Path) -> ArmResult | str | None:
    """An arm-seed's numbers (None: not measured yet; text: what is wrong with its ``results.json``, which is read
    as untrusted: a regular file, size-capped, typed)."""
    path = folder / "results.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(regular_files.read_text(path, RESULTS_BYTES))
        metrics = {str(k): (None if v is None else float(v)) for k, v in dict(raw["metrics"]).items()}
        series = {str(m): {int(step): float(v) for step, v in dict(values).items()}
                  for m, values in dict(raw.get("series") or {}).items()}
        return ArmResult(str(raw["arm"]), int(raw["seed"]), metrics, int(raw["steps"]), int(raw["tokens_seen"]),
                         int(raw["parameters"]), series, read_details(raw.get("details")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{folder.parent.name} seed {folder.name.removeprefix('seed-')}: results.json cannot be read ({exc})"


def shared_tokenizer(root: Path, experiment: Experiment, scale: Scale, say: Say) -> Path:
    """The experiment's one vocabulary (trained on the pretraining text once, then read)."""
    folder = experiment_dir(root, experiment, scale) / "tokenizer"
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


def pretraining_spec(arm: Arm, scale: Scale, seed: int, tokenizer: Path, run_dir: Path,
                     changes: Mapping[str, Any] | None = None) -> JobSpec:
    """The arm's pretraining job: the scale's settings with the arm's changes, then ``changes`` (the measured
    checkpoints' keeping: ``series.pretraining_changes``; a grown batch: ``token_budget.arm_batch_size``)."""
    steps = arm.steps(scale)                                     # the scale's, or the arm's own (equal compute)
    training = TrainingConfig(task=PRETRAINING.name, learning_rate=scale.learning_rate, total_steps=steps,
                              batch_size=scale.batch_size, max_seq_length=scale.seq_length,
                              eval_every=max(1, steps // 10), eval_batches=10,
                              checkpoint_every=max(1, steps // 4), checkpoint_every_s=60.0,
                              keep_last_checkpoints=2, seed=seed).replace(**{**arm.training, **(changes or {})})
    return JobSpec(training, preset=scale.preset, corpus=CORPUS, max_documents=scale.max_documents,
                   eval_fraction=0.05, tokenizer=str(tokenizer), run_dir=str(run_dir),
                   task_settings=dict(arm.settings)).replace(**dict(arm.job))


def arm_spec(experiment: Experiment, arm: Arm, scale: Scale, seed: int, tokenizer: Path, run_dir: Path) -> JobSpec:
    """The pretraining job ``experiment`` runs for ``arm``: ``pretraining_spec`` with the measured checkpoints
    kept, and the arm's batch grown to another arm's tokens per step where it names one (``token_budget``)."""
    batch = arm_batch_size(experiment, arm, scale, tokenizer, CORPUS)
    changes = {**pretraining_changes(experiment, arm, scale), **({"batch_size": batch} if arm.tokens_like else {})}
    return pretraining_spec(arm, scale, seed, tokenizer, run_dir, changes)


def pretrain(spec: JobSpec, run_dir: Path, say: Say, should_stop: ShouldStop | None = None) -> None:
    """Train the arm's run to its end: read when finished, continued from its newest checkpoint when stopped;
    ``ExperimentStopped`` when ``should_stop`` ended it first (after a checkpoint of the step it reached)."""
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
    trainer = job.trainer
    if trainer.train(should_stop=should_stop).status == TrainStatus.STOPPED:
        last = trainer.last_checkpoint
        if trainer.global_step > 0 and (last is None or last.name != checkpoint_name(trainer.global_step)):
            trainer.save_checkpoint()
        raise ExperimentStopped(f"stopped at step {trainer.global_step} of {run_dir}")


def _check(should_stop: ShouldStop | None) -> None:
    if should_stop is not None and should_stop():
        raise ExperimentStopped("stopped between arms")


def run_arm(root: Path, experiment: Experiment, arm: Arm, scale: Scale, seed: int, tokenizer: Path,
            say: Say, should_stop: ShouldStop | None = None) -> ArmResult:
    """Pretrain one arm with one seed, evaluate it, and keep its numbers (read back when already there)."""
    folder = seed_dir(root, experiment, arm, seed, scale)
    kept = folder / "results.json"
    found = read_result(folder)
    if isinstance(found, ArmResult):
        run_dir = pretrain_dir(root, experiment, arm, seed, scale)
        found = with_syntax(found, run_dir, kept, say)
        return with_measured(found, experiment, arm, scale, run_dir, kept, say, should_stop)
    if isinstance(found, str):                                   # damaged: measured again, never a crash
        say(f"{found}: measuring it again")
    owner = pretraining_owner(experiment, arm)
    run_dir = pretrain_dir(root, experiment, arm, seed, scale)
    spec = arm_spec(experiment, owner, scale, seed, tokenizer, run_dir)
    batch = spec.training_config().batch_size                    # the scale's, or grown (RoBERTa)
    shared = f" (shared with {owner.name})" if owner is not arm else ""
    grown = (f" of {batch} inputs (as many tokens as {owner.tokens_like}'s {scale.batch_size})"
             if owner.tokens_like else "")
    say(f"{experiment.name} · {arm.name} · seed {seed}: pretraining {owner.steps(scale):,} steps{grown}{shared}")
    pretrain(spec, run_dir, say, should_stop)
    model = final_model(run_dir)
    metrics: dict[str, float | None] = {}
    causal = arm.settings.get("objective") in ("clm", "rtd")     # no masked-LM head to measure (rtd: a discriminator)
    held_out = builtin_corpus(CORPUS, scale.max_documents + scale.eval_documents)[scale.max_documents:]
    loaded = load(model)
    metrics["masked_acc"] = None if causal else masked_accuracy(loaded, held_out, scale)
    _check(should_stop)
    owned = read_result(seed_dir(root, experiment, owner, seed, scale)) if owner is not arm else None
    if isinstance(owned, ArmResult) and all(m in owned.metrics for m in SYNTAX_METRICS):
        syntax_found, details = {m: owned.metrics[m] for m in SYNTAX_METRICS}, dict(owned.details)   # one model
    else:
        say(f"{experiment.name} · {arm.name} · seed {seed}: the Syntax tab's best heads and layer probe")
        syntax_found, details = measure_syntax(loaded, say)
    metrics.update(syntax_found)
    measure_each(experiment, arm, scale, seed, model, folder, metrics, say, should_stop)
    series = measure_series(experiment, arm, scale, seed, run_dir, folder, metrics, lambda: _check(should_stop), say)
    parameters = sum(p.numel() for p in loaded.model.parameters())
    steps = owner.steps(scale)
    result = ArmResult(arm.name, seed, metrics, steps, steps * batch * scale.seq_length,
                       parameters, series, details)
    folder.mkdir(parents=True, exist_ok=True)
    keep_result(result, kept)
    return result


def keep_result(result: ArmResult, kept: Path) -> None:
    """Write ``result`` to ``kept`` (a results.json) atomically: whole or as it was."""
    partial = kept.with_suffix(".partial")
    partial.write_text(json.dumps(asdict(result), indent=1), encoding="utf-8")
    os.replace(partial, kept)


def measure_each(experiment: Experiment, arm: Arm, scale: Scale, seed: int, model: Path, folder: Path,
                 metrics: dict[str, float | None], say: Say, should_stop: ShouldStop | None = None) -> None:
    """Into ``metrics``: each of the experiment's fine-tuned and frozen-feature metrics (``measured_by_runs``) it
    lacks, of the final ``model`` (None where one does not apply to ``arm``)."""
    for metric in measured_by_runs(experiment):
        if metric in metrics:
            continue
        _check(should_stop)
        if not applies(arm, metric):
            metrics[metric] = None
            continue
        say(f"{experiment.name} · {arm.name} · seed {seed}: {METRICS[metric]}")
        metrics[metric] = measure(arm, metric, model, folder / metric, scale, seed)


def measured_by_runs(experiment: Experiment) -> list[str]:
    """The experiment's metrics that fine-tune the arm's model or fit a classifier on its frozen features."""
    return [m for m in experiment.metrics if m in DOWNSTREAM or m in FEATURES_OF_ANY_ARM]


def with_measured(found: ArmResult, experiment: Experiment, arm: Arm, scale: Scale, run_dir: Path, kept: Path,
                  say: Say, should_stop: ShouldStop | None = None) -> ArmResult:
    """``found`` with the experiment's metrics it lacks (a results.json written before the experiment asked for
    them, e.g. the named-entity F1) measured on the final model of ``run_dir`` and kept; as it is when it has them
    all or the run is gone (shown as —)."""
    if all(m in found.metrics for m in measured_by_runs(experiment)) or not finished(run_dir):
        return found
    say(f"{found.arm} seed {found.seed}: measuring what its results.json lacks")
    metrics = dict(found.metrics)
    measure_each(experiment, arm, scale, found.seed, final_model(run_dir), kept.parent, metrics, say, should_stop)
    result = replace(found, metrics=metrics)
    keep_result(result, kept)
    return result


def with_syntax(found: ArmResult, run_dir: Path, kept: Path, say: Say) -> ArmResult:
    """``found`` (a kept results.json) with the syntax metrics it lacks (one written before they existed) measured
    on the final model of ``run_dir`` and kept; as it is when it has them or the run is gone (shown as —)."""
    if all(m in found.metrics for m in SYNTAX_METRICS) or not finished(run_dir):
        return found
    say(f"{found.arm} seed {found.seed}: measuring the syntax metrics its results.json lacks")
    metrics, details = measure_syntax(load(final_model(run_dir)), say)
    result = replace(found, metrics={**found.metrics, **metrics}, details={**found.details, **details})
    keep_result(result, kept)
    return result


def measure_syntax(loaded: LoadedModel, say: Say) -> tuple[dict[str, float | None], dict[str, Any]]:
    """The syntax metrics of ``loaded`` and what they rest on; None each (shown as —, said why) when the model
    cannot be measured so (e.g. too few of the sentences fit its positions), never a crash after its pretraining."""
    try:
        found = syntax_measures(loaded)
    except ValueError as exc:
        say(f"the syntax metrics cannot be measured: {exc}")
        return dict.fromkeys(SYNTAX_METRICS), {}
    return dict(found.metrics()), found.details()


def run_experiment(root: str | Path, experiment: Experiment, scale: Scale, say: Say = print,
                   arms: Sequence[str] | None = None, should_stop: ShouldStop | None = None) -> list[ArmResult]:
    """Every arm (or those named in ``arms``) with every seed of ``scale``, in order; the numbers of each.
    ``should_stop`` is asked between steps and arms (``ExperimentStopped`` when it says so)."""
    root = Path(root)
    tokenizer = shared_tokenizer(root, experiment, scale, say)
    chosen = [arm for arm in experiment.arms if arms is None or arm.name in arms]
    found = []
    for seed in range(scale.seeds):
        for arm in chosen:
            _check(should_stop)
            found.append(run_arm(root, experiment, arm, scale, seed, tokenizer, say, should_stop))
    return found
