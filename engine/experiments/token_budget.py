"""RoBERTa's equal tokens per batch (Liu et al. 2019, §4.2): an arm whose inputs are shorter gets a bigger batch.

RoBERTa's SENTENCE-PAIR inputs (one sentence per segment) are much shorter than BERT's segment pairs, so the paper
"increased the batch size so that the total number of tokens remains similar to SEGMENT-PAIR"; DOC-SENTENCES'
inputs near a document's end are shorter than FULL-SENTENCES', and the paper grew those batches to the tokens of
FULL-SENTENCES. An arm with ``tokens_like`` (``engine.experiments.definitions.Arm``) does the same here: its batch
size is the tokens per step of the arm it names (that arm's batch times its mean input) over the mean of its own
input, the means counted on the first epoch of the experiment's pretraining text as the job's own data cuts it
(specials included).

One fixed batch per arm: a sentence-pair input is short everywhere, so a fixed batch is what the paper did; for
doc-sentences the paper grew each short batch on the fly, and ours matches it on average over the epoch. The
growth is capped at ``MAX_GROWTH`` times the scale's batch (memory stays bounded whatever the text).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.experiments.definitions import Arm, Experiment, Scale
from engine.text.builtin_corpus import builtin_corpus
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.pretraining import PRETRAINING, build_datasets
from engine.training.tasks.pretraining_settings import PretrainingSettings

MAX_GROWTH = 8                        # an arm's batch is at most this many times the scale's
COUNTING_BATCH = 256                  # inputs read at a time while counting


def mean_input_tokens(documents: Sequence, tokenizer: WordPieceTokenizer, scale: Scale,
                      training: Mapping[str, Any], settings: Mapping[str, Any], seed: int = 0) -> float:
    """The mean tokens of one input (specials included, as the model reads it) of the first epoch of pretraining
    data made of ``documents`` with the scale's length and the arm's ``training`` and ``settings`` changes
    (``Arm.training``, ``Arm.settings``), counted a batch at a time (bounded memory whatever the text)."""
    config = TrainingConfig(task=PRETRAINING.name, batch_size=COUNTING_BATCH, max_seq_length=scale.seq_length,
                            seed=seed).replace(**{**dict(training), "batch_size": COUNTING_BATCH})
    data, _ = build_datasets(documents, None, tokenizer, config, settings=PretrainingSettings(**dict(settings)))
    tokens = inputs = 0
    for index in range(data.num_batches(0)):
        batch = data.batch(0, index)
        tokens, inputs = tokens + batch.num_tokens, inputs + int(batch.input_ids.shape[0])   # (B, S)
    if not inputs:
        raise ValueError("the pretraining text makes no input to count tokens of")
    return tokens / inputs


def grown_batch_size(batch_size: int, own_mean: float, reference_tokens: float) -> int:
    """The batch size whose inputs of ``own_mean`` tokens hold about ``reference_tokens`` tokens in all: at least
    1, at most ``MAX_GROWTH`` times ``batch_size`` (the scale's)."""
    if own_mean <= 0 or reference_tokens <= 0:
        raise ValueError(f"a mean input length and tokens per step must be positive, got {own_mean}, "
                         f"{reference_tokens}")
    return max(1, min(MAX_GROWTH * batch_size, round(reference_tokens / own_mean)))


@lru_cache(maxsize=32)
def _mean_of(corpus: str, scale: Scale, tokenizer_dir: str, changes: str) -> float:
    """``mean_input_tokens`` of one arm's changes (JSON text: a hashable cache key), cached per process."""
    training, settings = json.loads(changes)
    return mean_input_tokens(builtin_corpus(corpus, scale.max_documents), WordPieceTokenizer.from_file(tokenizer_dir),
                             scale, training, settings)


def arm_batch_size(experiment: Experiment, arm: Arm, scale: Scale, tokenizer: Path, corpus: str) -> int:
    """The batch size ``arm`` pretrains with at ``scale``: the scale's, or grown to the tokens per step of the arm
    it names in ``tokens_like`` (that arm's batch times its mean input; a chain is followed: the experiment checks
    it ends), the means counted on the first ``scale.max_documents`` documents of ``corpus``."""
    if not arm.tokens_like:
        return scale.batch_size

    def mean(of: Arm) -> float:
        return _mean_of(corpus, scale, str(tokenizer), json.dumps([dict(of.training), dict(of.settings)],
                                                                   sort_keys=True))

    reference = experiment.arm(arm.tokens_like)
    reference_tokens = arm_batch_size(experiment, reference, scale, tokenizer, corpus) * mean(reference)
    return grown_batch_size(scale.batch_size, mean(arm), reference_tokens)
