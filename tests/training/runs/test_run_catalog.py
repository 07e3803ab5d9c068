"""Which runs exist and how far each got; continuing a stopped run from its name, with clear refusals."""
from __future__ import annotations

import shutil

import pytest

from engine.training.tasks.job_spec import JobSpec
from engine.training.runs.run_catalog import find_run, run_summaries
from engine.training.runs.state import read_metrics
from engine.training.worker.training_worker import TrainingWorker

pytestmark = pytest.mark.usefixtures("one_thread")
TIMEOUT = 120.0


def spec(total: int, run_dir) -> JobSpec:
    """Every checkpoint keeps its optimizer state: the tests delete the newer ones to stop a run early."""
    return JobSpec(dict(total_steps=total, batch_size=4, max_seq_length=32, eval_every=0, checkpoint_every=3,
                        learning_rate=1e-3, keep_optimizer_state="all"), preset="tiny", corpus="shakespeare", max_documents=20, vocab_size=300,
                   run_dir=str(run_dir))


@pytest.fixture
def worker(tmp_path):
    w = TrainingWorker(tmp_path / "runs")
    yield w
    w.close(timeout_s=30)


def test_summaries_count_checkpoints_and_say_which_can_continue(worker: TrainingWorker) -> None:
    root = worker.runs_root
    worker.start(spec(6, root / "run-a"))
    assert worker.join(TIMEOUT)
    worker.start(spec(9, root / "run-b"))                           # its later checkpoints go: as if stopped at 3
    assert worker.join(TIMEOUT)
    shutil.rmtree(root / "run-b" / "checkpoints" / "step-000009")
    shutil.rmtree(root / "run-b" / "checkpoints" / "step-000006")
    (root / "not-a-run").mkdir()
    runs = {s.name: s for s in run_summaries(root)}
    assert set(runs) == {"run-a", "run-b"}
    a, b = runs["run-a"], runs["run-b"]
    assert (a.checkpoints, a.step, a.total_steps, a.resumable) == (2, 6, 6, False)
    assert (b.checkpoints, b.step, b.total_steps, b.resumable) == (1, 3, 9, True)
    assert b.label == "run-b · step 3 / 9 · 1 checkpoint · shakespeare" and b.task == "pretraining"
    assert [s.name for s in worker.runs()] == [s.name for s in run_summaries(root)]

    with pytest.raises(ValueError, match="already reached its total of 6 steps; give a larger total"):
        worker.continue_run("run-a")
    with pytest.raises(ValueError, match="must be more than the 6 steps"):
        worker.continue_run("run-a", total_steps=6)
    with pytest.raises(ValueError, match="the run run-z is gone"):
        worker.continue_run("run-z")
    with pytest.raises(ValueError, match="no run named"):
        worker.continue_run("../run-a")

    info = worker.continue_run("run-b")                               # on to its own total, from step 3
    assert info.run_dir == root / "run-b" and worker.join(TIMEOUT)
    status = worker.status()
    assert status.state == "finished" and status.step == 9, status
    steps = [r["step"] for r in read_metrics(root / "run-b" / "metrics.jsonl") if r.get("kind") == "train"]
    assert steps[-6:] == [4, 5, 6, 7, 8, 9]
    worker.continue_run("run-a", total_steps=8)                       # a finished run, given a larger total
    assert worker.join(TIMEOUT) and worker.status().step == 8 and find_run(root, "run-a").total_steps == 8
