"""A small pretraining job the training tests share: documents made from the tiny vocabulary's words, and a
``JobSpec`` that trains the tiny model on them for a few steps with checkpoints and evaluations."""
from __future__ import annotations

from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from tests.conftest import WORDS


def documents(count: int = 12) -> list[list[str]]:
    """Small documents of sentences made from the tiny vocabulary's words."""
    words = list(WORDS)
    return [[" ".join(words[(d * 7 + s * 3 + k) % len(words)] for k in range(6)) + "." for s in range(6)]
            for d in range(count)]


def pretraining(tmp_path, tokenizer_dir, **training) -> JobSpec:
    values = dict(total_steps=6, batch_size=4, max_seq_length=32, warmup_steps=0, eval_every=3, eval_batches=1,
                  checkpoint_every=3, learning_rate=1e-3, seed=3)
    values.update(training)
    return JobSpec(TrainingConfig(**values), preset="tiny", model_overrides=dict(hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=37), documents=documents(), corpus_label="test words",
                   tokenizer=str(tokenizer_dir), run_dir=str(tmp_path / "run"))
