"""Preparing a training run: corpus -> tokenizer -> datasets -> model -> trainer (new or resumed).

Plain functions for the worker's thread. ``progress(message)`` reports each stage and
answers False when the run was stopped meanwhile, in which case they return None.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from engine.model.config import preset as preset_config
from engine.text.corpus import Document, builtin_corpus, train_eval_split, train_tokenizer
from engine.model.heads import BertWithHeads
from engine.data.pretraining import PretrainingDataset
from engine.training.run_spec import RunSpec, describe_spec, given_training_fields
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.trainer import Trainer, build_datasets
from engine.training.config import TrainingConfig
from engine.training.state import INFO_FILE, read_metrics
from engine.training.run_folder import METRICS_FILE, resolve_checkpoint

Progress = Callable[[str], bool]


@dataclass
class PreparedRun:
    """A trainer ready to train, with what the worker shows about it."""

    trainer: Trainer
    tokenizer: WordPieceTokenizer
    train_data: PretrainingDataset
    history: list[dict[str, Any]] = field(default_factory=list)   # metrics of a resumed run so far
    checkpoint: Path | None = None                                 # where a resumed run continues from


def read_run_documents(spec: RunSpec) -> list[Document]:
    """The spec's documents (uploaded ones win over the built-in corpus), empty ones dropped."""
    if spec.documents is not None:
        documents = [list(doc) for doc in spec.documents]
    else:
        documents = builtin_corpus(spec.corpus, max_documents=spec.max_documents)
    documents = [[s for s in doc if isinstance(s, str) and s.strip()] for doc in documents]
    documents = [doc for doc in documents if doc]
    if not documents:
        raise ValueError("the corpus is empty: it has no documents with text")
    return documents


def prepare_run(spec: RunSpec, config: TrainingConfig, run_dir: Path, progress: Progress) -> PreparedRun | None:
    """Build a new run's trainer (or a resumed one's when ``spec.resume_from`` is set)."""
    if not progress("reading the corpus"):
        return None
    documents = read_run_documents(spec)
    if spec.resume_from is not None:
        return _prepare_resume(spec, documents, run_dir, progress)
    train_docs, eval_docs = split_documents(documents, spec.eval_fraction, config.seed, config.nsp)
    if spec.tokenizer_dir is not None:
        if not progress(f"loading the tokenizer from {spec.tokenizer_dir}"):
            return None
        tokenizer = WordPieceTokenizer.from_file(spec.tokenizer_dir)
    else:
        if not progress(f"training a WordPiece vocabulary of {spec.vocab_size:,} tokens"):
            return None
        tokenizer = train_tokenizer(  # on the training documents only: held-out text stays unseen
            train_docs, spec.vocab_size, spec.min_frequency, spec.lowercase,
            progress=lambda fraction, message: progress(f"training the vocabulary ({fraction:.0%}): {message}"))
    if not progress(f"building pretraining instances from {len(train_docs):,} documents"):
        return None
    train_data, eval_data = build_datasets(train_docs, eval_docs, tokenizer, config, spec.short_seq_prob)
    if not progress("building the model"):
        return None
    overrides = dict(spec.model_overrides)
    overrides["vocab_size"] = tokenizer.vocab_size
    overrides.setdefault("max_position_embeddings", max(512, config.max_seq_length))
    model_config = preset_config(spec.preset, **overrides)
    torch.manual_seed(config.seed)
    model = BertWithHeads(model_config, heads=("mlm", "nsp") if config.nsp else ("mlm",))
    trainer = Trainer(model, tokenizer, train_data, eval_data, config, run_dir)
    tokenizer.save(run_dir / "tokenizer")
    (run_dir / "run_spec.json").write_text(json.dumps(describe_spec(spec, config), indent=1, default=str) + "\n",
                                           encoding="utf-8")
    return PreparedRun(trainer, tokenizer, train_data)


def _prepare_resume(spec: RunSpec, documents: list[Document], run_dir: Path, progress: Progress) -> PreparedRun | None:
    checkpoint = resolve_checkpoint(spec.resume_from)
    if not progress(f"resuming from {checkpoint.name}"):
        return None
    info = json.loads((checkpoint / INFO_FILE).read_text(encoding="utf-8"))
    saved = TrainingConfig.from_dict(info["config"])
    overrides = given_training_fields(spec.training)
    config = saved.replace(**overrides)
    tokenizer = WordPieceTokenizer.from_file(checkpoint)
    # the same split as the original run (split with the saved run's seed)
    train_docs, eval_docs = split_documents(documents, spec.eval_fraction, saved.seed, saved.nsp)
    if not progress("rebuilding the pretraining data"):
        return None
    train_data, eval_data = build_datasets(train_docs, eval_docs, tokenizer, config, spec.short_seq_prob)
    trainer = Trainer.resume(checkpoint, train_data, eval_data, run_dir=run_dir, **overrides)
    return PreparedRun(trainer, tokenizer, train_data, read_metrics(run_dir / METRICS_FILE), checkpoint)


def split_documents(documents: list[Document], eval_fraction: float, seed: int, nsp: bool,
           ) -> tuple[list[Document], list[Document]]:
    """``train_eval_split`` seeded by the run; with NSP the held-out set needs two documents
    (NotNext pairs come from another document), so one is moved over when possible, and a
    corpus too small for that is trained on whole, without evaluation."""
    train, held_out = train_eval_split(documents, eval_fraction, random.Random(seed))
    if nsp and len(held_out) == 1:
        if len(train) >= 4:
            train, held_out = train[1:], held_out + train[:1]
        else:
            train, held_out = train + held_out, []
    return train, held_out
