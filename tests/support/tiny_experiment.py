"""A two-arm experiment small enough for a test (about a minute on 2 busy cores): BERT's masking mix against 100%
[MASK], 12 pretraining steps of 4 × 32 tokens on 30 documents, one seed, 4 fine-tuning steps per downstream task;
``offered()`` puts it among ``EXPERIMENTS`` (first, so the Experiments tab's dropdown opens on it)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from engine.experiments import builtin
from engine.experiments.definitions import Arm, Claim, Experiment, Scale

TINY_SCALE = Scale(steps=12, seeds=1, max_documents=30, eval_documents=5, downstream_steps=4, batch_size=4,
                   seq_length=32, vocab_size=500)
TINY = Experiment(
    name="tiny-mix",
    title="Masking mix, tiny (test)",
    source="Devlin et al. 2019, Table 8 (two of its rows)",
    factor="the masking mix",
    arms=(Arm("mix-80-10-10", "80/10/10 (BERT's)", training={"nsp": False}, settings={"mask_mix": "0.8,0.1,0.1"},
              paper={"MNLI": 84.2}),
          Arm("mix-100-0-0", "100% [MASK]", training={"nsp": False}, settings={"mask_mix": "1,0,0"},
              paper={"MNLI": 84.3})),
    paper_columns=("MNLI",),
    claims=(Claim("BERT's mix and 100% [MASK] fine-tune about equally", "mix-80-10-10", "mix-100-0-0", "pos_acc",
                  "same"),),
    quick=TINY_SCALE)


@contextlib.contextmanager
def offered() -> Iterator[Experiment]:
    """``TINY`` first among the built-in experiments for the ``with`` block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builtin, "EXPERIMENTS", {TINY.name: TINY, **builtin.EXPERIMENTS})
        yield TINY
