"""report_to="tensorboard": a run's records as TensorBoard event files in <run>/logs, read back with
TensorBoard's own reader and compared with metrics.jsonl; resume appends; the setting is recorded in
run.json, kept or changed on resume, refused when unknown or when TensorBoard is not installed; app runs
(the worker) log the same way."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.loop.report_to import MISSING_TENSORBOARD, TensorBoardCallback, report_callbacks, scalars
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import read_metrics
from engine.training.worker.training_worker import TrainingWorker
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def event_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar TensorBoard shows for ``log_dir``: tag -> [(step, value)] (its own reader, all points)."""
    reader = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    reader.Reload()
    return {tag: [(e.step, e.value) for e in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]}


def expected_scalars(run: RunFolder) -> dict[str, list[tuple[int, float]]]:
    """What metrics.jsonl says TensorBoard should show: train/<name> and eval/<name> at each record's step."""
    found: dict[str, list[tuple[int, float]]] = {}
    for record in read_metrics(run.metrics_path):
        for tag, value in scalars(record["kind"], record).items():
            found.setdefault(tag, []).append((record["step"], value))
    return found


def assert_same(shown: dict[str, list[tuple[int, float]]], expected: dict[str, list[tuple[int, float]]]) -> None:
    assert sorted(shown) == sorted(expected)
    for tag, points in expected.items():
        assert [s for s, _ in shown[tag]] == [s for s, _ in points], tag
        assert [v for _, v in shown[tag]] == pytest.approx([v for _, v in points], rel=1e-6), tag  # float32 events


def test_tensorboard_shows_what_metrics_jsonl_holds_and_resume_appends(tmp_path, tokenizer_dir):
    spec = pretraining(tmp_path, tokenizer_dir, log_every=1).replace(report_to="tensorboard")
    prepare_job(spec).trainer.train(num_steps=5)        # checkpoints at 3; steps 4 and 5 will be redone
    run = RunFolder(tmp_path / "run")
    assert json.loads(run.spec_path.read_text())["report_to"] == "tensorboard"
    first = event_scalars(run.logs_dir)
    assert [s for s, _ in first["train/loss"]] == [1, 2, 3, 4, 5] and [s for s, _ in first["eval/mlm_loss"]] == [3]
    assert {"train/loss", "train/lr", "train/tokens_per_s", "train/grad_norm", "train/mlm_loss", "train/nsp_acc",
            "eval/mlm_loss", "eval/mlm_acc", "eval/nsp_loss", "eval/nsp_acc"} <= set(first)
    assert "train/step" not in first and "train/elapsed" not in first
    assert_same(first, expected_scalars(run))

    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run.root)))
    assert resumed.spec.report_to == "tensorboard" and resumed.trainer.global_step == 3     # the run's own choice
    resumed.trainer.train()
    files = sorted(run.logs_dir.iterdir())
    assert len(files) == 2                               # one per session, in the same folder
    starts = [e.step for e in EventFileLoader(str(files[1])).Load() if e.HasField("session_log")]
    assert starts == [4]                                 # the second session hides the first's steps 4 and 5
    shown = event_scalars(run.logs_dir)
    assert [s for s, _ in shown["train/loss"]] == [1, 2, 3, 4, 5, 6] and [s for s, _ in shown["eval/mlm_loss"]] == [3, 6]
    assert_same(shown, expected_scalars(run))


def test_no_report_to_writes_no_logs_and_a_resume_may_change_it(tmp_path, tokenizer_dir):
    prepare_job(pretraining(tmp_path, tokenizer_dir)).trainer.train(num_steps=3)
    run = RunFolder(tmp_path / "run")
    assert not run.logs_dir.exists() and json.loads(run.spec_path.read_text())["report_to"] is None
    resumed = prepare_job(JobSpec({"total_steps": 4}, documents=documents(), resume_from=str(run.root),
                                  report_to="tensorboard"))
    assert json.loads(run.spec_path.read_text())["report_to"] == "tensorboard"       # recorded for the next resume
    assert json.loads(run.spec_path.read_text())["documents"] == 12                  # the rest of run.json kept
    resumed.trainer.train()
    assert [s for s, _ in event_scalars(run.logs_dir)["train/loss"]] == [4]          # logs from where it went on


def test_unknown_or_missing_loggers_are_refused_before_anything_is_written(tmp_path, tokenizer_dir, monkeypatch):
    never = tmp_path / "never"
    with pytest.raises(ValueError, match="report_to must be one of none, tensorboard, got 'wandb'"):
        prepare_job(pretraining(tmp_path, tokenizer_dir).replace(report_to="wandb", run_dir=str(never)))
    with pytest.raises(ValueError, match="must be one of none, tensorboard"):
        report_callbacks("trackio", tmp_path)
    assert report_callbacks(None, tmp_path) == [] and report_callbacks("none", tmp_path) == []
    monkeypatch.setitem(sys.modules, "tensorboard", None)                 # as if it were not installed
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ValueError) as caught:
        prepare_job(pretraining(tmp_path, tokenizer_dir).replace(report_to="tensorboard", run_dir=str(never)))
    assert str(caught.value) == MISSING_TENSORBOARD and "`logging` extra" in MISSING_TENSORBOARD
    assert "pip install tensorboard==2.20.0" in MISSING_TENSORBOARD
    with pytest.raises(ValueError, match="logging"):
        TensorBoardCallback(tmp_path)
    assert not never.exists()


def test_app_runs_log_to_tensorboard_too(tmp_path):
    worker = TrainingWorker(tmp_path / "runs")
    try:
        spec = JobSpec(dict(total_steps=4, batch_size=4, max_seq_length=32, eval_every=2, eval_batches=1,
                            checkpoint_every=0, learning_rate=1e-3), preset="tiny", corpus="shakespeare",
                       max_documents=20, vocab_size=300, report_to="tensorboard")
        info = worker.start(spec)
        assert worker.join(120.0) and worker.status().state == "finished", worker.status().message
    finally:
        worker.close(timeout_s=30)
    run = RunFolder(info.run_dir)
    shown = event_scalars(run.logs_dir)
    assert [s for s, _ in shown["train/loss"]] == [1, 2, 3, 4] and [s for s, _ in shown["eval/mlm_loss"]] == [2, 4]
    assert_same(shown, expected_scalars(run))
