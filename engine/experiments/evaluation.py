"""How every arm of an experiment is measured, the same way for all: the held-out masked-token accuracy on text no
arm trained on, and the accuracy of the arm's final model fine-tuned with fixed settings on the bundled downstream
data (part-of-speech tagging, sentiment, sentence pairs; the named-entity F1 on WNUT 17 posts where an experiment
asks); or, for an arm that uses the model's frozen features (``Arm.features``,
BERT's Table 7), a classifier on them, scored on the same held-out sentences (``engine.experiments.features``); and
the Syntax tab's best-head and layer-probe figures of the model, without fine-tuning (``syntax_metrics``)."""
from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from engine.checkpoints.hf_format import load
from engine.data.instance_plan import max_segment_tokens
from engine.data.pretraining import PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.token_store import TokenStore
from engine.experiments.definitions import Arm, Scale
from engine.experiments.features import frozen_feature_accuracy, frozen_feature_f1
from engine.experiments.syntax_metrics import SYNTAX_METRICS, syntax_measures
from engine.model.heads import IGNORE_INDEX
from engine.model.loaded_model import LoadedModel
from engine.text.documents import Document
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.finetuning import CLASSIFICATION
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.token_classification import TOKEN_CLASSIFICATION

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"
# task name -> (the fine-tuning task, its bundled data, the held-out metric read from the final evaluation)
DOWNSTREAM: dict[str, tuple[str, Path, str]] = {
    "pos_acc": (TOKEN_CLASSIFICATION.name, EXAMPLES / "pos-ewt-sample.tsv", "eval_accuracy"),
    "sentiment_acc": (CLASSIFICATION.name, EXAMPLES / "sentiment.csv", "eval_accuracy"),
    "pair_acc": (CLASSIFICATION.name, EXAMPLES / "qnli-squad-sample.csv", "eval_accuracy"),
    "ner_f1": (TOKEN_CLASSIFICATION.name, EXAMPLES / "ner-wnut17-sample.tsv", "eval_entity_f1"),   # WNUT 17 posts
}
ALL_HIDDEN = PretrainingObjective("mlm", (1.0, 0.0, 0.0), False)   # every chosen token behind [MASK]
EVAL_SEED = 1234                                                    # the same chosen tokens for every arm
FEATURE_METRICS = ("pos_acc", "ner_f1")   # what an arm of frozen features is measured by (the tagging tasks)
FEATURES_OF_ANY_ARM = {"pos_features_acc": ("pos_acc", "concat-up-to-4"),   # metric -> (its data's task, recipe):
                       "ner_features_f1": ("ner_f1", "concat-up-to-4")}
                                     # a fine-tuned arm's model also read through frozen features (BERT, Table 8)
HELD_OUT = 0.2                       # the share of the downstream data held out (by seed) to score on


def masked_accuracy(loaded: LoadedModel, documents: Sequence[Document], scale: Scale) -> float:
    """The share of the chosen 15% of tokens of ``documents`` that the model recovers, each hidden behind [MASK]
    (the same tokens for every model: a fixed seed)."""
    tokenizer = loaded.require_tokenizer("so it cannot be measured")
    store = TokenStore.from_texts(documents, tokenizer, max_segment_tokens(scale.seq_length, False))
    data = PretrainingDataset(store, tokenizer, scale.seq_length, scale.batch_size, 0.15, 0.0, False, False,
                              EVAL_SEED, objective=ALL_HIDDEN)
    model = loaded.model.eval()
    correct = total = 0
    with torch.no_grad():
        for index in range(data.num_batches(0)):
            batch = data.batch(0, index)
            out = model(**batch.model_inputs()).mlm
            labels = batch.labels                                          # (B, S), IGNORE_INDEX where not chosen
            if out.positions is not None:                                  # sparse: (N, V) at (N, 2) positions
                wanted = labels[out.positions[:, 0], out.positions[:, 1]]  # (N,)
                guessed = out.logits.argmax(-1)
            else:                                                          # dense: (B, S, V)
                chosen = labels != IGNORE_INDEX
                wanted, guessed = labels[chosen], out.logits.argmax(-1)[chosen]
            correct += int((guessed == wanted).sum())
            total += int(wanted.numel())
    if not total:
        raise ValueError("the held-out text has no token to mask: give the experiment more documents")
    return correct / total


def finished(run_dir: Path) -> bool:
    """Whether the run at ``run_dir`` reached its total steps (its newest checkpoint is the last)."""
    latest = RunFolder(run_dir).latest() if run_dir.is_dir() else None
    return latest is not None and latest.total_steps is not None and latest.step >= latest.total_steps


def final_model(run_dir: Path) -> Path:
    """The newest checkpoint of a finished run."""
    latest = RunFolder(run_dir).latest()
    if latest is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint")
    return latest.path


def downstream_spec(metric: str, model_dir: Path, run_dir: Path, scale: Scale, seed: int) -> JobSpec:
    """The fixed fine-tuning job that measures ``metric`` for the model at ``model_dir``."""
    task, data, _ = DOWNSTREAM[metric]
    training = TrainingConfig(task=task, learning_rate=scale.downstream_learning_rate,
                              total_steps=scale.downstream_steps, batch_size=16, max_seq_length=scale.seq_length,
                              warmup_ratio=0.1, eval_every=scale.downstream_steps, eval_batches=0,
                              checkpoint_every=scale.downstream_steps, checkpoint_every_s=None, seed=seed,
                              final_dtype="float32")
    return JobSpec(training, data=str(data), init_from=str(model_dir), eval_fraction=HELD_OUT, run_dir=str(run_dir))


def downstream_accuracy(metric: str, model_dir: Path, run_dir: Path, scale: Scale, seed: int,
                        say: Callable[[str], Any] = lambda message: None) -> float:
    """Fine-tune the model at ``model_dir`` for ``metric``'s task into ``run_dir`` (a finished run there is read,
    not redone) and return the held-out metric of its final evaluation."""
    if not finished(run_dir):
        if run_dir.exists():                         # stopped part-way: a short run, redone from its start
            shutil.rmtree(run_dir)
        job = prepare_job(downstream_spec(metric, model_dir, run_dir, scale, seed), say)
        assert job is not None                       # no progress callback cancels it
        job.trainer.train()
    _, _, key = DOWNSTREAM[metric]
    latest = RunFolder(run_dir).latest()
    value = (latest.eval_metrics or {}).get(key) if latest is not None else None
    if not isinstance(value, (int, float)):
        raise RuntimeError(f"the fine-tuning run {run_dir} logged no {key}")
    return float(value)


def applies(arm: Arm, metric: str) -> bool:
    """Whether ``arm`` is measured by the downstream ``metric``: every one when it fine-tunes; the tagging tasks
    alone for an arm of frozen features (word features; no sentence classifier is fitted). The syntax
    metrics read the model itself: every arm; a frozen-feature metric of every arm (``FEATURES_OF_ANY_ARM``) the arms
    that fine-tune (an arm of frozen features is measured so by ``pos_acc`` already)."""
    if metric in FEATURES_OF_ANY_ARM:
        return not arm.features
    return not arm.features or metric in (*FEATURE_METRICS, *SYNTAX_METRICS)


def measure(arm: Arm, metric: str, model_dir: Path, run_dir: Path, scale: Scale, seed: int,
            say: Callable[[str], Any] = lambda message: None) -> float | None:
    """``metric`` of the model at ``model_dir`` as ``arm`` uses it: fine-tuned into ``run_dir`` (read when done),
    or, for an arm of frozen features, the classifier's score on a tagging task (None for the other tasks); a
    frozen-feature metric (``FEATURES_OF_ANY_ARM``) by its recipe's classifier; a
    syntax metric (``SYNTAX_METRICS``) of the model itself, for every arm (nothing written to ``run_dir``)."""
    if not applies(arm, metric):
        return None
    if metric in SYNTAX_METRICS:
        return syntax_measures(load(model_dir)).metrics()[metric]
    if metric in FEATURES_OF_ANY_ARM:
        task, recipe = FEATURES_OF_ANY_ARM[metric]
        return frozen_feature_score(task, load(model_dir), recipe, scale, seed)
    if not arm.features:
        return downstream_accuracy(metric, model_dir, run_dir, scale, seed, say)
    return frozen_feature_score(metric, load(model_dir), arm.features, scale, seed)


def frozen_feature_score(task: str, loaded: LoadedModel, recipe: str, scale: Scale, seed: int) -> float:
    """``task``'s score (``DOWNSTREAM``: word accuracy, or entity F1 where the fine-tuning reads ``entity_f1``)
    of the scale's classifier on ``recipe``'s frozen features of ``loaded``, on the task's held-out sentences."""
    _, data, key = DOWNSTREAM[task]
    score = frozen_feature_f1 if key.endswith("entity_f1") else frozen_feature_accuracy
    return score(loaded, recipe, data, HELD_OUT, seed, scale.feature_classifier)
