"""Training on text a person gives (pasted or uploaded): the run keeps its own copy of the text, so a stopped
run continues exactly as the uninterrupted run would have, even after the upload is gone; text too thin
for the job is refused with what it needs."""
from __future__ import annotations

import json
import random

import pytest
import torch

from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.tasks.job_documents import check_text
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import RunFolder
from engine.training.worker.training_worker import TrainingWorker
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")

MODEL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
TIMEOUT = 60.0


def pasted_text(paragraphs: int = 14, seed: int = 0) -> str:
    """Paragraphs of sentences made of the tiny vocabulary's words, separated by blank lines (Windows line ends
    and a trailing space too: the copy must keep the text byte for byte)."""
    rng = random.Random(seed)
    words = list(WORDS)
    blocks = [" ".join(" ".join(rng.choice(words) for _ in range(rng.randint(4, 8))).capitalize() + "."
                       for _ in range(6)) for _ in range(paragraphs)]
    return "\r\n\r\n".join(blocks) + " \n"


def jsonl_text(lines: int = 14) -> str:
    return "\n".join(json.dumps({"text": block, "id": i}) for i, block in enumerate(pasted_text(lines).split("\r\n\r\n")))


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, tiny_tokenizer):
    directory = tmp_path_factory.mktemp("tokenizer")
    tiny_tokenizer.save(directory)
    return directory


def text_job(run_dir, tokenizer_dir, text: str, fmt: str = "txt", **training) -> JobSpec:
    values = dict(total_steps=6, batch_size=4, max_seq_length=32, warmup_steps=0, eval_every=3, eval_batches=1,
                  checkpoint_every=3, learning_rate=1e-3, seed=5)
    values.update(training)
    return JobSpec(TrainingConfig(**values), preset="tiny", model_overrides=dict(MODEL), corpus_text=text,
                   corpus_format=fmt, corpus_label="pasted text", tokenizer=str(tokenizer_dir), run_dir=None if run_dir is None else str(run_dir))


def same_weights(mine: torch.nn.Module, theirs: torch.nn.Module) -> None:
    for (name, a), b in zip(mine.state_dict().items(), theirs.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("fmt", ["txt", "jsonl"])
def test_the_run_keeps_the_text_and_resumes_from_its_copy_bit_for_bit(tmp_path, tokenizer_dir, fmt):
    text = pasted_text() if fmt == "txt" else jsonl_text()
    straight = prepare_job(text_job(tmp_path / "straight", tokenizer_dir, text, fmt)).trainer
    straight.train()
    first = prepare_job(text_job(tmp_path / "run", tokenizer_dir, text, fmt)).trainer
    first.train(num_steps=3)
    run = RunFolder(tmp_path / "run")
    record = json.loads(run.spec_path.read_text(encoding="utf-8"))
    assert record["corpus_file"] == f"corpus.{fmt}" and record["corpus"] == "pasted text"   # relative to the run
    assert "corpus_text" not in record
    assert (run.root / f"corpus.{fmt}").read_bytes() == text.encode("utf-8")                  # exactly as given
    moved = RunFolder(tmp_path / "moved")                       # the run folder moved elsewhere: the copy goes along
    run.root.rename(moved.root)
    resumed = prepare_job(JobSpec({"total_steps": 6}, resume_from=str(moved.root)))
    assert resumed.spec.corpus == str(moved.root / f"corpus.{fmt}") and resumed.trainer.global_step == 3
    resumed.trainer.train()                                     # the trainer checks the data's fingerprint too
    same_weights(resumed.trainer.model, straight.model)


def test_a_run_that_lost_its_copy_says_so(tmp_path, tokenizer_dir):
    prepare_job(text_job(tmp_path / "run", tokenizer_dir, pasted_text())).trainer.train(num_steps=3)
    (tmp_path / "run" / "corpus.txt").unlink()
    with pytest.raises(FileNotFoundError, match="lost its copy of the text it trains on \\(corpus.txt\\)"):
        resume_spec(tmp_path / "run")


def test_the_worker_continues_a_stopped_run_on_pasted_text_exactly(tmp_path, tokenizer_dir):
    text = pasted_text(20, seed=1)
    straight = prepare_job(text_job(tmp_path / "straight", tokenizer_dir, text, total_steps=30,
                                    checkpoint_every=0, eval_every=0)).trainer
    straight.train()
    worker = TrainingWorker(tmp_path / "runs")
    try:
        info = worker.start(text_job(None, tokenizer_dir, text, total_steps=30, checkpoint_every=0, eval_every=0))
        while worker.status().step < 3:
            assert worker.status().state in ("preparing", "running"), worker.status()
            worker.join(0.01)
        worker.stop(wait_s=TIMEOUT)
        stopped = worker.status()
        assert stopped.outcome == "stopped" and 3 <= stopped.step < 30, stopped
        worker.continue_run(info.run_dir.name)                 # by name only: the text comes from the run folder
        assert worker.join(TIMEOUT)
        status = worker.status()
        assert status.outcome == "finished" and status.step == 30, status
        steps = [r["step"] for r in worker.metrics_since(0)[0] if r["kind"] == "train"]
        assert steps == list(range(1, 31))
        same_weights(worker.trainer.model, straight.model)
    finally:
        worker.close(timeout_s=TIMEOUT)


@pytest.mark.parametrize("text, training, message", [
    ("One sentence here. And another one.", {}, "at least two documents"),
    ("The cat sat. The dog ran.\n\nA bird sang. It was red.", {"batch_size": 16},
     "makes only [0-9]+ training sequences? of up to 32 tokens, fewer than one batch of 16"),
    ("   \n\n  ", {}, "corpus_text is empty"),
])
def test_text_too_thin_for_the_job_is_refused_with_what_it_needs(tmp_path, tokenizer_dir, text, training, message):
    with pytest.raises(ValueError, match=message):
        prepare_job(text_job(tmp_path / "never", tokenizer_dir, text, **training))
    assert not (tmp_path / "never").exists()


def test_nsp_needs_a_document_of_two_sentences():
    """Without one, every next-sentence pair would be NotNext: the app refuses such text (``check_text``)."""
    one_each = [["The cat sat."], ["The dog ran."], ["A bird sang."]]
    with pytest.raises(ValueError, match="each of the 3 documents has one sentence; write several sentences"):
        check_text(one_each, nsp=True)
    check_text(one_each, nsp=False)                         # without NSP single sentences train
    check_text(one_each + [["Two sentences.", "Here."]], nsp=True)
