"""The features of the fine-tuning tasks: extractive QA (SQuAD files), sequence classification, token
classification and multiple choice (a CSV, or next-sentence choices built from a corpus). Each builder is a
``TaskDefinition.data`` (``engine.training.tasks.registry``): ``(spec, config, tokenizer, id2label, log, known, *,
settings) -> (training, held-out, id2label)``, ``settings`` the task's own (``TaskDefinition.settings``; QA's
windows, multiple choice's number of choices); ``id2label`` is None for the tasks without labels. A builder is
named by the target layout it makes (``engine.data.features.TARGETS``), so any task training on that layout
may declare it as its ``data``.

Labels: a new head's ``id2label`` comes from the labels of both files (``label_names``: numeric or
alphabetical order). When the start model already has the task's head and its labels include every
label of the data (names, or ids of those names), the job keeps that head and its ``id2label``, so a
model can be fine-tuned further; otherwise the head is replaced by a fresh one for the data's labels.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from engine.data.classification import ClassificationExample, build_classification_dataset, read_classification_file
from engine.data.features import FeatureDataset, split_held_out
from engine.data.labels import as_label_names, label_names
from engine.data.multiple_choice import ChoiceDataset, build_choice_dataset, read_choice_file
from engine.data.next_sentence_choice import next_sentence_examples
from engine.data.qa_features import build_qa_dataset, read_squad
from engine.data.tagged_text import TaggedSentence, read_tagged_file
from engine.data.token_features import build_token_dataset
from engine.text.documents import Document
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_documents import job_documents
from engine.training.tasks.job_spec import JobSpec

Log = Callable[[str], object]
LabelledData = tuple[FeatureDataset, FeatureDataset | None, dict[int, str]]


def _split(spec: JobSpec, config: TrainingConfig, read: Callable[[str], list]) -> tuple[list, list]:
    """(training, held-out) examples: ``eval_data``'s, or a seeded ``held_out_fraction`` of ``data``'s."""
    examples = read(spec.data)[:spec.max_examples]
    if spec.eval_data is not None:
        return examples, read(spec.eval_data)[:spec.max_examples]
    train, held_out = split_held_out(examples, spec.held_out_fraction, config.seed)
    if not train:
        raise ValueError(f"{spec.data}: nothing left to train on after holding out {len(held_out)} examples")
    return train, held_out


def _id2label(labels: Sequence[str], fixed: dict[int, str] | None, known: dict[int, str] | None,
              what: str) -> dict[int, str]:
    """``fixed`` (a resumed run's), else ``known`` (the start model's head) when it covers ``labels``,
    else new ids for ``labels``."""
    if fixed is not None:
        return fixed
    if known and set(labels) <= set(known.values()):
        return dict(known)
    names = label_names(labels)
    if len(names) < 2:
        raise ValueError(f"{what} needs at least two different labels, found only "
                         f"{', '.join(map(repr, names.values())) or 'none'}")
    return names


def classification_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                        id2label: dict[int, str] | None = None, log: Log = lambda message: None,
                        known: dict[int, str] | None = None, *, settings: Any = None) -> LabelledData:
    """Sequence-classification features of ``spec.data`` (+ ``eval_data``): labels as names or ids."""
    def read(path: str) -> list[ClassificationExample]:
        examples = read_classification_file(path, spec.max_file_bytes)
        where = [f"{Path(path).name}, line {e.line}" for e in examples]
        for example, label in zip(examples, as_label_names([e.label for e in examples], id2label or known, where)):
            example.label = label
        return examples

    train, held_out = _split(spec, config, read)
    id2label = _id2label([e.label for e in train + held_out], id2label, known, f"{spec.data}: classification")
    label2id = {name: i for i, name in id2label.items()}
    train_data = build_classification_dataset(train, tokenizer, label2id, config.max_seq_length, config.batch_size,
                                              config.seed)
    eval_data = build_classification_dataset(held_out, tokenizer, label2id, config.max_seq_length,
                                             config.batch_size, config.seed, shuffle=False) if held_out else None
    return train_data, eval_data, id2label


def token_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
               id2label: dict[int, str] | None = None, log: Log = lambda message: None,
               known: dict[int, str] | None = None, *, settings: Any = None) -> LabelledData:
    """Token-classification features of CoNLL-U or ``word<TAB>tag`` files (first piece of a word labelled)."""
    def read(path: str) -> list[TaggedSentence]:
        sentences = read_tagged_file(path, spec.max_file_bytes)
        tags = [tag for s in sentences for tag in s.tags]
        resolved = iter(as_label_names(tags, id2label or known, [s.where for s in sentences for _ in s.tags]))
        for sentence in sentences:
            sentence.tags = [next(resolved) for _ in sentence.tags]
        log(f"{path}: {len(sentences):,} sentences, {len(tags):,} tagged words")
        return sentences

    train, held_out = _split(spec, config, read)
    id2label = _id2label([t for s in train + held_out for t in s.tags], id2label, known,
                         f"{spec.data}: token classification")
    label2id = {name: i for i, name in id2label.items()}
    train_data = build_token_dataset(train, tokenizer, label2id, config.max_seq_length, config.batch_size, config.seed,
                                     log=log)
    eval_data = build_token_dataset(held_out, tokenizer, label2id, config.max_seq_length, config.batch_size,
                                    config.seed, shuffle=False, log=log) if held_out else None
    return train_data, eval_data, id2label


def choice_features(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                    id2label: dict[int, str] | None = None, log: Log = lambda message: None,
                    known: dict[int, str] | None = None, *, settings: Any,
                    ) -> tuple[ChoiceDataset, ChoiceDataset | None, None]:
    """Multiple-choice features (``choice_data``) of ``spec.data``, or of the job's corpus without it
    (``settings.num_choices`` choices each)."""
    documents = job_documents(spec) if spec.data is None else None
    return (*choice_data(spec, config, tokenizer, settings.num_choices, documents, log), None)


def choice_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer, num_choices: int,
                documents: list[Document] | None = None, log: Log = lambda message: None,
                ) -> tuple[ChoiceDataset, ChoiceDataset | None]:
    """Multiple-choice features of ``spec.data`` (a CSV), or, without it, next-sentence choices (``num_choices``
    each) built from ``documents`` (split by document first, so held-out contexts and their wrong choices are
    unseen)."""
    if spec.data is not None:
        train, held_out = _split(spec, config, lambda path: read_choice_file(path, spec.max_file_bytes))
    else:
        if documents is None:
            raise ValueError("multiple choice without a data file needs documents to build next-sentence choices")
        train_docs, eval_docs = split_held_out(documents, spec.held_out_fraction, config.seed)
        if len(eval_docs) == 1:                       # wrong choices come from other documents: two at least
            train_docs, eval_docs = (train_docs[1:], eval_docs + train_docs[:1]) if len(train_docs) > 2 else (
                train_docs + eval_docs, [])
        train = next_sentence_examples(train_docs, num_choices, config.seed, spec.max_examples)
        held_out = next_sentence_examples(eval_docs, num_choices, config.seed + 1,
                                          spec.max_examples) if eval_docs else []
        log(f"next-sentence choices: {len(train):,} from {len(train_docs):,} documents, {len(held_out):,} held out "
            f"from {len(eval_docs):,}; {num_choices} choices each")
    train_data = build_choice_dataset(train, tokenizer, config.max_seq_length, config.batch_size, config.seed)
    eval_data = build_choice_dataset(held_out, tokenizer, config.max_seq_length, config.batch_size, config.seed,
                                     shuffle=False) if held_out else None
    return train_data, eval_data


def qa_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
            id2label: dict[int, str] | None = None, log: Log = lambda message: None,
            known: dict[int, str] | None = None, *, settings: Any) -> tuple[FeatureDataset, FeatureDataset | None, None]:
    """QA windows of SQuAD files cut as ``settings`` say (``QASettings``: ``doc_stride``, ``max_question_len``;
    questions about one context stay on one side of the split)."""
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
        return build_qa_dataset(items, tokenizer, config.max_seq_length, config.batch_size, settings.doc_stride,
                                settings.max_question_len, config.seed, shuffle, progress)
    return features(train, True), features(held_out, False) if held_out else None, None
