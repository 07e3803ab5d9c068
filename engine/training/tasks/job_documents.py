"""The text of a training job: its documents (a corpus, given text or uploaded documents), their checks and
their seeded split. Each task's features are built by its own data builder (``TaskDefinition.data``:
``engine.training.tasks.task_data`` and the task modules).

Every function rebuilds the same data from the same spec and seed, which is what makes an exact
resume possible (the trainer checks a fingerprint of it).
"""
from __future__ import annotations

import random
from pathlib import Path

from engine.data.pretraining import PretrainingDataset
from engine.text.builtin_corpus import BUILTIN_CORPORA, builtin_corpus
from engine.text.documents import Document, parse_documents, read_documents, train_eval_split
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec


def load_corpus(corpus: str, max_documents: int | None = None) -> list[Document]:
    """A built-in corpus by name, or the documents of a .txt/.md/.jsonl file."""
    if corpus in BUILTIN_CORPORA:
        return builtin_corpus(corpus, max_documents=max_documents)
    if not Path(corpus).is_file():
        raise ValueError(f"the corpus {corpus!r} is neither built in nor a file here; a run trained on uploaded "
                         "documents needs them given again to resume")
    documents = read_documents(corpus)
    return documents[:max_documents] if max_documents is not None else documents


def job_documents(spec: JobSpec) -> list[Document]:
    """The spec's documents (given ``documents`` win over ``corpus_text``, which wins over ``corpus``; the
    first ``max_documents`` of text or a corpus), with empty sentences and documents dropped."""
    if spec.documents is not None:
        documents = [list(doc) for doc in spec.documents]
    elif spec.corpus_text is not None:
        documents = parse_documents(spec.corpus_text, spec.corpus_format, spec.corpus_label or "the text")
        documents = documents[:spec.max_documents] if spec.max_documents is not None else documents
    else:
        documents = load_corpus(spec.corpus, spec.max_documents)
    documents = [[s for s in doc if isinstance(s, str) and s.strip()] for doc in documents]
    documents = [doc for doc in documents if doc]
    if not documents:
        raise ValueError("the corpus is empty: it has no documents with text")
    return documents


def check_text(documents: list[Document], nsp: bool, pairs: bool = True) -> None:
    """ValueError, saying what to add, when ``documents`` cannot make what next-sentence prediction needs:
    NotNext segments come from another document (two documents at least), and, with ``pairs``, IsNext
    pairs are two sentences of one document (without one, every pair is NotNext and NSP learns nothing).
    ``prepare_job`` checks the documents; the app checks the pairs of the text a person gives too."""
    if not documents:
        raise ValueError("the text is empty: give some text to train on")
    if not nsp:
        return
    if len(documents) < 2:
        raise ValueError("next-sentence prediction needs at least two documents (its NotNext segments come "
                         "from another document), but the text is one document; separate documents with a "
                         "blank line (or give one JSON line each), or turn NSP off")
    if pairs and not any(len(doc) >= 2 for doc in documents):
        raise ValueError(f"next-sentence prediction needs documents of two sentences or more (an IsNext pair is "
                         f"two sentences that follow each other), but each of the {len(documents):,} documents "
                         "has one sentence; write several sentences per document, or turn NSP off")


def check_one_batch(train_data: PretrainingDataset, config: TrainingConfig) -> None:
    """ValueError when the training text makes fewer sequences than one batch, with the numbers."""
    count = train_data.planned_instances(0, config.batch_size)
    if count < config.batch_size:
        raise ValueError(f"the text makes only {count:,} training sequence{'s' if count != 1 else ''} of up to "
                         f"{config.max_seq_length} tokens, fewer than one batch of {config.batch_size}; add text, "
                         "or lower the batch size")


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
