"""A training run as the worker sees it: what to train (``RunSpec``) and how it is going (``WorkerStatus``)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.text.corpus import Document
from engine.training.config import TrainingConfig

STATES = ("idle", "preparing", "running", "paused", "stopping", "finished", "failed", "diverged")
ACTIVE_STATES = frozenset({"preparing", "running", "paused", "stopping"})


@dataclass
class RunSpec:
    """What to train: model size, corpus, tokenizer and training settings.

    ``documents`` (already read, e.g. from an upload with ``corpus.read_documents``) wins
    over the built-in ``corpus``. ``tokenizer_dir`` loads a vocabulary instead of training
    one of ``vocab_size`` on the corpus. ``training`` holds ``TrainingConfig`` fields (or
    is a ``TrainingConfig``). The run goes to ``runs_root/run_name`` (the worker's root and
    a timestamped name by default). ``resume_from`` (a run or checkpoint directory)
    continues that run instead: its tokenizer and data settings are reused, the corpus
    must be the same, and ``training`` may change only ``trainer.RESUMABLE_OVERRIDES``.
    """

    preset: str = "tiny"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    corpus: str = "shakespeare"
    max_documents: int | None = None
    documents: list[Document] | None = None
    corpus_label: str | None = None
    tokenizer_dir: str | Path | None = None
    vocab_size: int = 4000
    min_frequency: int = 2
    lowercase: bool = True
    eval_fraction: float = 0.05
    short_seq_prob: float = 0.1
    training: TrainingConfig | dict[str, Any] = field(default_factory=dict)
    runs_root: str | Path | None = None
    run_name: str | None = None
    resume_from: str | Path | None = None

    def training_config(self) -> TrainingConfig:
        """The validated ``TrainingConfig`` (ValueError names the bad setting)."""
        if isinstance(self.training, TrainingConfig):
            return self.training
        names = {f.name for f in dataclasses.fields(TrainingConfig)}
        unknown = sorted(set(self.training) - names)
        if unknown:
            raise ValueError(f"unknown training setting(s): {', '.join(unknown)}")
        return TrainingConfig(**self.training)

    def validate(self) -> TrainingConfig:
        """Check what can be checked at once (settings, preset, corpus name); the validated config."""
        from engine.model.config import preset as preset_config
        from engine.text.corpus import BUILTIN_CORPORA
        from engine.training.trainer import RESUMABLE_OVERRIDES

        config = self.training_config()
        if self.resume_from is None:
            preset_config(self.preset, **{k: v for k, v in self.model_overrides.items() if k != "vocab_size"})
            if self.documents is None and self.corpus not in BUILTIN_CORPORA:
                raise ValueError(f"unknown built-in corpus {self.corpus!r}; choose one of: "
                                 f"{', '.join(BUILTIN_CORPORA)} or upload documents")
        else:
            fixed = sorted(set(given_training_fields(self.training)) - RESUMABLE_OVERRIDES)
            if fixed:
                raise ValueError(f"cannot change {', '.join(fixed)} when resuming a run; only "
                                 f"{', '.join(sorted(RESUMABLE_OVERRIDES))} may change")
        return config


@dataclass
class RunInfo:
    """What ``start`` answers: the run's id, directory and length."""

    run_id: int
    run_dir: Path
    total_steps: int
    started: float


@dataclass
class WorkerStatus:
    """A consistent snapshot of the worker for the UI (plain values, safe to keep)."""

    state: str                                  # one of STATES
    message: str
    step: int = 0
    total_steps: int = 0
    run_id: int = 0
    run_dir: Path | None = None
    elapsed: float = 0.0                        # wall seconds since start() (preparation included)
    eta_s: float | None = None                  # seconds to total_steps at the recent pace (pauses excluded)
    metrics: dict[str, Any] | None = None       # the last train record
    eval_metrics: dict[str, Any] | None = None  # the last eval record
    last_checkpoint: Path | None = None
    outcome: str | None = None                  # when ended: "finished" | "stopped" | "failed" | "diverged"
    error: str | None = None                    # "Type: message" for failures and divergence
    traceback: str | None = None                # the full traceback of a failure (for logs, not the UI)
    records: int = 0                            # metrics_since's next index
    waiting: bool = False                       # the trainer is waiting between steps (paused / priority)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


def given_training_fields(training: TrainingConfig | dict[str, Any]) -> dict[str, Any]:
    """The training settings a spec sets explicitly (all of them for a TrainingConfig)."""
    return training.to_dict() if isinstance(training, TrainingConfig) else dict(training)


def describe_spec(spec: RunSpec, config: TrainingConfig) -> dict[str, Any]:
    corpus = spec.corpus_label or ("uploaded documents" if spec.documents is not None else spec.corpus)
    return {"preset": spec.preset, "model_overrides": spec.model_overrides, "corpus": corpus,
            "max_documents": spec.max_documents,
            "documents": len(spec.documents) if spec.documents is not None else None,
            "tokenizer_dir": spec.tokenizer_dir, "vocab_size": spec.vocab_size, "eval_fraction": spec.eval_fraction,
            "training": config.to_dict()}
