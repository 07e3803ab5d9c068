"""A job's preparation says what it is doing with a count and an ETA (``engine.training.jobs.stage_progress``):
every pass over the corpus reports at least every ``REPORT_EVERY_DOCUMENTS`` documents, the ETA follows the
stage's own pace on the given clock, and a second job on the same text trains no vocabulary (the cache's)."""
from __future__ import annotations

import math
import random
import re

import pytest

from engine.data import token_cache
from engine.data.token_cache import REPORT_EVERY_DOCUMENTS
from engine.training.jobs.setup import prepare_job
from engine.training.jobs.stage_progress import StageProgress, seconds_words
from engine.training.tasks.job_spec import JobSpec
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")
COUNTED = re.compile(r": (?:all )?[\d.,]+ (?:of [\d.,]+ )?MB")      # "…: 0.2 of 1.4 MB · ETA 3s", "…: all 1.4 MB read"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_eta_is_the_stages_own_pace_on_the_clock():
    clock, said = Clock(), []
    stages = StageProgress(said.append, clock)
    stages.stage("tokenising the text")
    assert stages.reading_message(0, 1_000_000) == "tokenising the text: 0.0 of 1.0 MB · ETA —"
    clock.now += 2.0                                   # a quarter in 2 s: 6 s to go
    stages.reading(250_000, 1_000_000)
    assert said[-1] == "tokenising the text: 0.2 of 1.0 MB · ETA 6s"
    assert stages.reading_message(1_000_000, 1_000_000) == "tokenising the text: all 1.0 MB read · finishing"
    assert stages.reading_message(3_000_000, None).startswith("tokenising the text: 3.0 MB read · ETA unknown")
    stages.stage("counting")                           # a new stage's pace starts again
    clock.now += 10.0
    assert stages.reading_message(500_000, 1_000_000) == "counting: 0.5 of 1.0 MB · ETA 10s"
    assert seconds_words(3723) == "1h 02m 03s" and seconds_words(65) == "1m 05s"


def documents(count: int) -> list[list[str]]:
    rng = random.Random(0)
    return [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "." for _ in range(4)]
            for _ in range(count)]


def job(run_dir, count: int = 200) -> JobSpec:
    training = dict(total_steps=1, batch_size=4, max_seq_length=32, eval_every=0, eval_batches=1, checkpoint_every=0)
    return JobSpec(training, preset="tiny", model_overrides=dict(hidden_size=32, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=64), documents=documents(count), vocab_size=120,
                   run_dir=str(run_dir))


def test_every_pass_reports_a_count_at_least_every_few_documents_and_a_second_job_uses_the_cache(
        tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))
    trained: list[int] = []
    train = token_cache.WordPieceTokenizer.train

    def counted_train(*args, **kwargs):                # the real trainer, counted
        trained.append(1)
        return train(*args, **kwargs)

    monkeypatch.setattr(token_cache.WordPieceTokenizer, "train", counted_train)
    said: list[str] = []
    assert prepare_job(job(tmp_path / "one"), lambda message: said.append(message)) is not None
    passes = {stage: [m for m in said if m.startswith(stage) and COUNTED.search(m)]
              for stage in ("counting the corpus's documents", "training a WordPiece vocabulary", "tokenising")}
    documents_read = {"counting the corpus's documents": 200, "training a WordPiece vocabulary": 200,
                      "tokenising": 200}      # the vocabulary pass reads every document (held-out ones skipped)
    for stage, reports in passes.items():
        assert len(reports) >= math.ceil(documents_read[stage] / REPORT_EVERY_DOCUMENTS), (stage, said)
        assert all(" of " in m or "all " in m for m in reports), "the total is known: text in memory"
        assert reports[-1].endswith("read · finishing") and all("ETA" in m for m in reports[:-1])
    assert trained == [1] and "building the model" in said

    said.clear()
    assert prepare_job(job(tmp_path / "two"), lambda message: said.append(message)) is not None
    assert trained == [1], "the same text and settings: the cached vocabulary, no training"
    assert not any(COUNTED.search(m) for m in said), "nothing is read again: the count and tokens are cached"
