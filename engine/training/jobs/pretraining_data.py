"""A pretraining job's data: its corpus source, its vocabulary and its tokens, each made once and cached.

``pretraining_data(spec, ...)`` is the one path of new and resumed pretraining runs: the spec's
``CorpusSource`` (given documents or text, a Hugging Face dataset, or a built-in corpus, file,
folder or glob), the held-out split of its document ids (seeded by the run, as ``train_eval_split``
always split the documents), a WordPiece vocabulary trained on the training documents when the job
brings none, and the ``TokenStore`` of the whole corpus from the token cache
(``engine.data.token_cache``), shared by the training and held-out ``PretrainingDataset``s. Under
torchrun rank 0 builds what the cache lacks while the other ranks wait, then every rank opens it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from typing import Any, Callable, TypeVar

import numpy as np
from tokenizers import Tokenizer

from engine.data.token_cache import Progress, count_documents, prepared_store, trained_vocabulary
from engine.data.corpus_sources import CorpusSource, dataset_source, documents_source, resolve_corpus
from engine.data.instance_plan import max_segment_tokens
from engine.data.pretraining import PretrainingDataset
from engine.data.token_store import TokenStore
from engine.text.documents import parse_documents, train_eval_split
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.pretraining_settings import objective_of
from engine.training.loop import distributed as dist
from engine.training.loop.config import TrainingConfig

T = TypeVar("T")
EXACT_SPLIT_UP_TO = 1_000_000     # documents split by random.shuffle (as earlier versions); numpy past that


def job_source(spec: JobSpec) -> CorpusSource:
    """Where the job's text comes from: given documents, given text, a dataset, else ``spec.corpus``."""
    if spec.documents is not None:
        documents = [[s for s in doc if isinstance(s, str) and s.strip()] for doc in spec.documents]
        return documents_source([doc for doc in documents if doc], spec.corpus_label or "the uploaded documents")
    if spec.corpus_text is not None:
        label = spec.corpus_label or "the text"
        return documents_source(parse_documents(spec.corpus_text, spec.corpus_format, label), label)
    if spec.dataset is not None:
        return dataset_source(spec.dataset, spec.dataset_config, spec.dataset_split, spec.text_column)
    source = resolve_corpus(spec.corpus)
    # a label (the app's server:<name>) names the files in messages instead of their server path
    return dataclasses.replace(source, name=spec.corpus_label) if spec.corpus_label and source.kind == "files" else source


def split_ids(count: int, eval_fraction: float, seed: int, nsp: bool) -> tuple[np.ndarray, np.ndarray]:
    """(training ids, held-out ids) of ``count`` documents: ``train_eval_split`` of the ids seeded by the
    run (the same documents earlier versions held out); with NSP the held-out set needs two documents, so
    one is moved over when possible, and a corpus too small for that is trained on whole."""
    if count <= EXACT_SPLIT_UP_TO:
        train, held_out = (np.asarray(part, dtype=np.int64) for part in
                           train_eval_split(list(range(count)), eval_fraction, random.Random(seed)))
    else:
        order = np.random.default_rng(seed).permutation(count)                       # (D,)
        n_eval = min(max(1, round(count * eval_fraction)), count - 2) if eval_fraction > 0 else 0
        train, held_out = order[n_eval:], order[:n_eval]
    if nsp and len(held_out) == 1:
        if len(train) >= 4:
            train, held_out = train[1:], np.concatenate([held_out, train[:1]])
        else:
            train, held_out = np.concatenate([train, held_out]), held_out[:0]
    return train, held_out


def from_main_process(make: Callable[[], T]) -> T:
    """``make()`` on rank 0 only, its result sent to every other rank (pickled: for small things such as a
    vocabulary's JSON); a failure on rank 0 is raised on every rank. One process: ``make()``."""
    if not dist.is_distributed():
        return make()
    result: Any = None
    if dist.is_main_process():
        try:
            result = ("ok", make())
        except Exception as exc:  # handed to the other ranks so that every process stops alike
            result = ("failed", exc)
    kind, value = dist.broadcast_object(result)
    if kind == "failed":
        raise value
    return value


def main_first(make: Callable[[], T]) -> T:
    """``make()`` on rank 0 first (it fills the cache), then on the other ranks (they read it); one process: ``make()``."""
    if not dist.is_distributed():
        return make()
    failure: Any = None
    if dist.is_main_process():
        try:
            result = make()
        except Exception as exc:  # handed to the other ranks so that every process stops alike
            failure = exc
    failure = dist.broadcast_object(failure)
    if failure is not None:
        raise failure
    return result if dist.is_main_process() else make()


WARNING_PREFIX = "warning: "   # a progress message that starts so is one to keep in sight (the worker's notice)


def corpus_vocabulary(spec: JobSpec, source: CorpusSource, config: TrainingConfig, say: Callable[[str], Any],
                      on_progress: Progress | None) -> WordPieceTokenizer:
    """A WordPiece vocabulary of ``spec.vocab_size`` trained on the training documents only (cached)."""
    say("counting the corpus's documents")
    count = main_first(lambda: count_documents(source, spec.max_documents, on_progress=on_progress))
    _, held_out = split_ids(count, spec.held_out_fraction, config.seed, config.nsp)
    say(f"training a WordPiece vocabulary of {spec.vocab_size:,} tokens on {count - len(held_out):,} documents")

    def train() -> str:
        return trained_vocabulary(source, spec.vocab_size, spec.min_frequency, spec.lowercase, spec.max_documents,
                                  held_out, on_progress=on_progress).backend.to_str()

    # rank 0 trains it and every rank uses rank 0's: the trainer may keep other pieces on another process, and
    # each node may have a cache of its own (docs/design/distributed.md)
    tokenizer = WordPieceTokenizer(Tokenizer.from_str(from_main_process(train)))
    shortfall = vocabulary_shortfall(spec.vocab_size, tokenizer.vocab_size)
    if shortfall:
        say(f"{WARNING_PREFIX}{shortfall}")
    return tokenizer


def vocabulary_shortfall(asked: int, trained: int) -> str | None:
    """The warning for a trained vocabulary smaller than asked, with why; None when it has the size asked."""
    if trained >= asked:
        return None
    return (f"the vocabulary has {trained:,} tokens, not the {asked:,} asked: the training text holds too few "
            f"distinct words and pieces for that many (a larger corpus, or a smaller --vocab-size, says the same)")


def same_vocabulary_everywhere(tokenizer: WordPieceTokenizer) -> None:
    """ValueError on every rank whose vocabulary (given, or the start model's) differs from rank 0's: the ids
    would mean other words there. One process: nothing to check."""
    if not dist.is_distributed():
        return
    mine = vocabulary_fingerprint(tokenizer)
    if dist.broadcast_object(mine) != mine:
        raise ValueError(f"this process (rank {dist.rank()}) has another vocabulary than rank 0: give every node "
                         "the same tokenizer files (or let rank 0 train one)")


def vocabulary_fingerprint(tokenizer: WordPieceTokenizer) -> str:
    """A hash of the token -> id mapping."""
    pairs = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()


def corpus_tokens(spec: JobSpec, source: CorpusSource, tokenizer: WordPieceTokenizer, config: TrainingConfig,
                  on_progress: Progress | None) -> TokenStore:
    """The corpus's ``TokenStore`` (sentences cut to fit one segment of ``config.max_seq_length``)."""
    pieces = max_segment_tokens(config.max_seq_length, config.nsp)
    return main_first(lambda: prepared_store(source, tokenizer, pieces, spec.max_documents, on_progress=on_progress))


def pretraining_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer, store: TokenStore,
                     ) -> tuple[PretrainingDataset, PretrainingDataset | None]:
    """The training and held-out datasets over ``store`` (ValueError when the text cannot make them)."""
    check_store(store, config.nsp)
    train, held_out = split_ids(store.num_documents, spec.held_out_fraction, config.seed, config.nsp)

    def make(pool: np.ndarray, seed: int) -> PretrainingDataset:
        return PretrainingDataset(store, tokenizer, config.max_seq_length, config.batch_size, config.mlm_probability,
                                  spec.short_seq_prob, config.nsp, config.whole_word_masking, seed, pool=pool,
                                  objective=objective_of(spec.settings))
    evaluation = make(held_out, config.seed + 1) if len(held_out) else None
    return make(train, config.seed), evaluation


def check_store(store: TokenStore, nsp: bool) -> None:
    """ValueError, saying what to add, when the corpus has no text, or one document with NSP on."""
    with_text = int((store.document_token_counts() > 0).sum())
    if with_text == 0:
        raise ValueError("the corpus is empty: it has no documents with text")
    if nsp and with_text < 2:
        raise ValueError("next-sentence prediction needs at least two documents (its NotNext segments come "
                         "from another document), but the text is one document; separate documents with a "
                         "blank line (or give one JSON line each), or turn NSP off")
