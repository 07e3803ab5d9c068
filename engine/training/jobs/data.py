"""The data of a training job: pretraining documents and datasets, fine-tuning features.

Every function rebuilds the same data from the same spec and seed, which is what makes an exact
resume possible (the trainer checks a fingerprint of it).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from engine.data.features import FeatureDataset, split_held_out
from engine.data.pretraining import PretrainingDataset
from engine.data.qa_features import build_qa_dataset, read_squad
from engine.text.corpus import (BUILTIN_CORPORA, Document, builtin_corpus, parse_documents, read_documents,
                                train_eval_split)
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.jobs.spec import JobSpec
from engine.training.jobs.task_data import choice_data, classification_data, token_data
from engine.training.tasks import build_datasets
from engine.training.tasks.qa_with_mlm import JointDataset

MLM_EVAL_FRACTION = 0.05     # qa_mlm: documents of the text corpus held out for the MLM/NSP evaluation
Log = Callable[[str], None]


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
    count = len(train_data.instances(0))
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


def pretraining_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                     train_docs: list[Document], eval_docs: list[Document],
                     ) -> tuple[PretrainingDataset, PretrainingDataset | None]:
    """Training and held-out pretraining datasets (NSP pairs, dynamic masking) of the split documents."""
    return build_datasets(train_docs, eval_docs, tokenizer, config, spec.short_seq_prob)


def finetuning_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                    id2label: dict[int, str] | None = None, log: Log = lambda message: None,
                    known_labels: dict[int, str] | None = None,
                    ) -> tuple[FeatureDataset, FeatureDataset | None, dict[int, str] | None]:
    """(training, held-out, id2label) features of a fine-tuning job. ``id2label`` (classification and
    token classification) is the given one (a resumed run keeps its model's), else ``known_labels`` (the
    start model's head) when they cover the data's labels, else made from the labels of both files."""
    task = config.task
    if task == "classification":
        return classification_data(spec, config, tokenizer, id2label, known_labels)
    if task == "token_classification":
        return token_data(spec, config, tokenizer, id2label, known_labels, log)
    if task == "multiple_choice":
        return (*choice_data(spec, config, tokenizer, job_documents(spec) if spec.data is None else None, log), None)
    return (*qa_data(spec, config, tokenizer, log), None)


def qa_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer, log: Log = lambda message: None,
            ) -> tuple[FeatureDataset | JointDataset, FeatureDataset | JointDataset | None]:
    """QA windows of SQuAD files (questions about one context stay on one side of the split); ``qa_mlm``
    pairs them with pretraining batches of its text."""
    limit = spec.max_examples

    def read(path: str) -> list:
        squad = read_squad(path, spec.max_file_bytes)
        log(f"{path}: {squad.summary()}")
        if not squad.examples:
            raise ValueError(f"{path} has no usable questions ({squad.summary()})")
        return squad.examples[:limit]

    examples = read(spec.data)
    if spec.eval_data is not None:
        train, held_out = examples, read(spec.eval_data)
    else:
        train, held_out = split_held_out(examples, spec.held_out_fraction, config.seed, lambda e: e.context)
    if not train:
        raise ValueError(f"{spec.data}: nothing left to train on after holding out {len(held_out)} examples")

    def progress(done: int, total: int) -> None:
        if total > 10_000 and (done % 10_000 == 0 or done == total):
            log(f"building QA features: {done}/{total} questions")

    def features(items: list, shuffle: bool) -> FeatureDataset:
        return build_qa_dataset(items, tokenizer, config.max_seq_length, config.batch_size, spec.doc_stride,
                                spec.max_question_len, config.seed, shuffle, progress)
    train_data, eval_data = features(train, True), features(held_out, False) if held_out else None
    if config.task == "qa_mlm":
        return with_pretraining(spec, config, tokenizer, train_data, eval_data, log)
    return train_data, eval_data


def with_pretraining(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer, train: FeatureDataset,
                     held_out: FeatureDataset | None, log: Log = lambda message: None,
                     ) -> tuple[JointDataset, JointDataset | None]:
    """qa_mlm: the QA features paired with pretraining batches of ``spec.mlm_corpus`` (a seeded
    ``MLM_EVAL_FRACTION`` of its documents held out, paired with the held-out features)."""
    if not spec.mlm_corpus:
        raise ValueError("task qa_mlm needs a text corpus for its masked-LM term (mlm_corpus)")
    train_docs, eval_docs = split_documents(load_corpus(spec.mlm_corpus), MLM_EVAL_FRACTION, config.seed, config.nsp)
    log(f"{spec.mlm_corpus}: {len(train_docs)} documents for the masked-LM term, {len(eval_docs)} held out")
    text_config = config.replace(max_seq_length=spec.mlm_seq_len or 128, batch_size=spec.mlm_batch_size or config.batch_size)
    text_train, text_eval = build_datasets(train_docs, eval_docs, tokenizer, text_config)
    joint_eval = JointDataset(held_out, text_eval) if held_out is not None and text_eval is not None else None
    return JointDataset(train, text_train), joint_eval
