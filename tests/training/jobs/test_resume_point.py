"""Continue passes over a damaged newest checkpoint to the newest good one, and says so (issue 27); a finished lean
run (``keep_optimizer_state="while-running"``) is refused with one sentence that says how to go on (issue 36)."""
from __future__ import annotations

import json
import shutil

import pytest

from engine.training.jobs.setup import prepare_job
from engine.training.jobs.resume_point import FINISHED_LEAN, checkpoint_problem, resume_point
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec
from engine.training.runs.state import drop_optimizer_state, finished_lean_refusal, read_metrics
from engine.training.worker.errors import CannotContinueError
from engine.training.worker.training_worker import TrainingWorker

pytestmark = pytest.mark.usefixtures("one_thread")
TIMEOUT = 120.0


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> RunFolder:
    """A finished 6-step run with checkpoints at steps 3 and 6, both with optimizer state (copied by each test
    that damages it)."""
    root = tmp_path_factory.mktemp("runs")
    worker = TrainingWorker(root)
    spec = JobSpec(dict(total_steps=6, batch_size=4, max_seq_length=32, eval_every=0, checkpoint_every=3,
                        learning_rate=1e-3, keep_optimizer_state="all"), preset="tiny", corpus="shakespeare", max_documents=20, vocab_size=300,
                   run_dir=str(root / "run"))
    worker.start(spec)
    assert worker.join(TIMEOUT) and worker.status().state == "finished"
    return RunFolder(root / "run")


@pytest.fixture
def worker(tmp_path, trained: RunFolder):
    shutil.copytree(trained.root, tmp_path / "runs" / "run")
    w = TrainingWorker(tmp_path / "runs")
    yield w
    w.close(timeout_s=30)


def test_every_kind_of_damage_is_found_before_continuing(worker: TrainingWorker) -> None:
    run = RunFolder(worker.runs_root / "run")
    newest = run.checkpoint_dir(6)
    assert checkpoint_problem(newest) is None and resume_point(run).note is None
    for name, raw, problem in [("model.safetensors", b"\x00" * 64, "model.safetensors cannot be read"),
                               ("config.json", b"[1]", "config.json is not a model configuration"),
                               ("training_state.pt", b"PK\x03\x04 torn", "training_state.pt cannot be read")]:
        kept = (newest / name).read_bytes()
        (newest / name).write_bytes(raw)
        assert checkpoint_problem(newest) == problem
        point = resume_point(run)
        assert point.checkpoint.step == 3
        assert point.note == f"Continuing from step-000003, the newest good checkpoint, because step-000006 is " \
                             f"damaged ({problem})."
        (newest / name).write_bytes(kept)


def test_continue_falls_back_to_the_newest_good_checkpoint_and_says_so(worker: TrainingWorker) -> None:
    run = RunFolder(worker.runs_root / "run")
    (run.checkpoint_dir(6) / "model.safetensors").write_bytes(b"not weights")
    info = worker.continue_run("run", total_steps=8)
    assert info.run_dir == run.root and worker.join(TIMEOUT)
    status = worker.status()
    assert status.state == "finished" and status.step == 8, status
    assert status.notice == ("Continuing from step-000003, the newest good checkpoint, because step-000006 is "
                             "damaged (model.safetensors cannot be read).")
    steps = [r["step"] for r in read_metrics(run.metrics_path) if r.get("kind") == "train"]
    assert steps == list(range(1, 9))                               # 4..6 redone from step 3, then 7 and 8


def test_continue_refuses_a_run_with_no_good_checkpoint_or_a_damaged_spec(worker: TrainingWorker) -> None:
    run = RunFolder(worker.runs_root / "run")
    (run.root / "run.json").write_text("{not json")
    with pytest.raises(CannotContinueError, match=r"the run run is damaged \(run.json: it is not valid JSON\); it "
                                                  r"cannot continue: start a new run"):
        worker.continue_run("run", total_steps=8)
    (run.root / "run.json").write_text(json.dumps({"corpus": "shakespeare"}))
    for step in (3, 6):
        (run.checkpoint_dir(step) / "training_state.pt").write_bytes(b"")
    with pytest.raises(CannotContinueError, match="every checkpoint of the run run is damaged "
                                                  r"\(the newest, step-000006: training_state.pt cannot be read\)"):
        worker.continue_run("run", total_steps=8)
    assert worker.status().state == "idle"


def test_a_lean_run_whose_newest_checkpoint_is_damaged_cannot_continue_and_says_why(worker: TrainingWorker) -> None:
    run = RunFolder(worker.runs_root / "run")
    older = run.checkpoint_dir(3)
    assert drop_optimizer_state(older)                       # what keep_optimizer_state="newest" leaves
    assert checkpoint_problem(older) == ("training_state.pt keeps no optimizer state "
                                         "(only a run's newest checkpoint does)")
    (run.checkpoint_dir(6) / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(CannotContinueError, match=r"the run run cannot continue: its newest checkpoint, step-000006, "
                                                  r"is damaged \(model.safetensors cannot be read\) and the older ones "
                                                  r"keep no optimizer state"):
        worker.continue_run("run", total_steps=8)


def test_a_finished_lean_run_is_refused_with_the_sentence_and_a_stopped_one_continues(tmp_path) -> None:
    """"while-running": ended at step 3 of 6 the run continues; finished, it is refused (no older checkpoint is
    taken instead), with the sentence naming the checkpoint to start a new fine-tune from."""
    worker = TrainingWorker(tmp_path / "runs")
    try:
        spec = JobSpec(dict(total_steps=6, batch_size=4, max_seq_length=32, eval_every=0, checkpoint_every=3,
                            learning_rate=1e-3, keep_optimizer_state="while-running"), preset="tiny",
                       corpus="shakespeare", max_documents=20, vocab_size=300, run_dir=str(tmp_path / "runs" / "lean"))
        worker.start(spec.replace(training=spec.training_config().replace(total_steps=3)))
        assert worker.join(TIMEOUT) and worker.status().state == "finished"
        run = RunFolder(tmp_path / "runs" / "lean")
        assert checkpoint_problem(run.checkpoint_dir(3)) == FINISHED_LEAN
        sentence = finished_lean_refusal("lean", "step-000003")
        with pytest.raises(CannotContinueError) as refused:
            worker.continue_run("lean", total_steps=6)
        assert str(refused.value) == sentence

        shutil.rmtree(run.root)
        prepare_job(spec).trainer.train(num_steps=3)          # ended part way (as a stop or a crash leaves it)
        assert checkpoint_problem(run.checkpoint_dir(3)) is None          # the newest keeps what Continue needs
        worker.continue_run("lean")
        assert worker.join(TIMEOUT) and worker.status().state == "finished" and worker.status().step == 6
        assert checkpoint_problem(run.checkpoint_dir(6)) == FINISHED_LEAN
        with pytest.raises(ValueError) as refused:
            resume_point(run)
        assert str(refused.value) == finished_lean_refusal("lean", "step-000006")
    finally:
        worker.close(timeout_s=30)
