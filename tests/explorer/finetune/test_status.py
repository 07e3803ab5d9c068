"""The Fine-tune tab's status: the worker's run as this tab sees it, a finished run named on a fresh page (the
worker's, or the newest fine-tuning run in the runs folder when the worker has had none), and a live view that
sends nothing twice."""
from __future__ import annotations

import time
from pathlib import Path

import gradio as gr
import pytest

from engine.training.runs.run_catalog import RunSummary
from engine.training.tasks.job_spec import JobSpec
from engine.training.loop.config import TrainingConfig
from engine.training.worker.run_state import RunState
from engine.training.worker.training_worker import TrainingWorker
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune.live import LIVE_OUTPUTS, live_update
from explorer.finetune.status import current_status, earlier_run_status, finetune_status, newest_finetuning_run
from explorer.services import Services
from support.finetune_helpers import classification_rows, save_tiny_model, write_csv

pytestmark = pytest.mark.usefixtures("one_thread")


def status(state: str, task: str = "classification", **fields) -> WorkerStatus:
    base = dict(step=20, total_steps=40, run_dir=Path("/srv/runs/finetune-classification-1"), elapsed=10.0,
                metrics={"loss": 0.41234, "accuracy": 0.75}, task=task,
                eval_metrics={"step": 20, "eval_classification_loss": 0.5, "eval_accuracy": 0.8})
    base.update(fields)
    return WorkerStatus(state, "step 20 / 40", **base)


def test_a_fine_tuning_run_shows_its_task_numbers():
    text = finetune_status(status("running"))
    assert text.startswith("**running** · step **20 / 40** · run `finetune-classification-1`\n\ntask **classif")
    assert "task **classification** · loss 0.412 · held-out loss 0.5 · held-out accuracy 80% (step 20)" in text
    assert "Fine-tune** tab" not in text and "/srv" not in text


def test_a_pretraining_run_is_named_and_sent_to_the_training_tab():
    active = finetune_status(status("running", task="pretraining"))
    assert active.startswith("A **pretraining** run is running (`finetune-classification-1`): see the **Training** tab")
    ended = finetune_status(status("finished", task="pretraining"))
    assert ended.startswith("The last run was a **pretraining** run") and "Press **Start**" in ended
    assert finetune_status(WorkerStatus("idle", "no run")).startswith("**idle**")


def test_the_live_view_sends_only_what_changed(tmp_path, tiny_tokenizer):
    services = Services(tokenizer=tiny_tokenizer, worker=TrainingWorker(tmp_path / "runs"))
    first, seen, active = live_update(services, None)
    assert len(first) == LIVE_OUTPUTS and not active
    assert first[0].startswith("**idle**")
    charts = first[1]["charts"]       # the curves: two empty charts that say why (points, not a figure)
    assert [c["empty"] for c in charts] == ["Loss: no fine-tuning run since the app started",
                                            "Metrics: no fine-tuning run since the app started"]
    assert first[1]["points"] == {} and first[1]["reset"]
    again, seen_again, _ = live_update(services, seen)
    assert seen_again == seen and all(isinstance(out, type(gr.skip())) for out in again)


def fine_tuning_job(model: Path, data: Path, steps: int) -> JobSpec:
    training = TrainingConfig(task="classification", learning_rate=3e-3, warmup_steps=1, total_steps=steps,
                              batch_size=8, max_seq_length=64, eval_every=3, eval_batches=0, checkpoint_every=0)
    return JobSpec(training, data=str(data), init_from=str(model), eval_fraction=0.25)


def test_a_fresh_page_names_the_newest_fine_tuning_run_in_the_runs_folder(tmp_path, tiny_tokenizer):
    """The worker's own finished run is "finished"; after a restart (a new worker over the same runs folder) the
    newest fine-tuning run on disk is named instead of "idle — no run yet", finished or not."""
    model = save_tiny_model(tmp_path / "model", tiny_tokenizer)
    data = write_csv(tmp_path / "classes.csv", classification_rows(24))
    worker = TrainingWorker(tmp_path / "runs")
    try:
        worker.start(fine_tuning_job(model, data, steps=6))
        assert worker.join(60.0) and worker.status().state == RunState.FINISHED, worker.status().message
        run = worker.status().run_dir.name
        services = Services(tokenizer=tiny_tokenizer, worker=worker)
        first, seen, _ = live_update(services, None)
        assert first[0].startswith("**finished** · step **6 / 6**") and run in first[0]
        curves = first[1]     # the run's points once, as the Training tab's: loss and accuracy, train and held-out
        assert [c["title"] for c in curves["charts"]] == ["Loss", "Metrics"] and curves["reset"]
        assert curves["points"]["train:loss"][0] == list(range(1, 7))       # steps 1..6, each step's loss
        assert {"eval:eval_classification_loss", "train:accuracy", "eval:eval_accuracy"} <= set(curves["points"])
        again, _, _ = live_update(services, seen)
        assert isinstance(again[1], type(gr.skip()))          # nothing new: nothing sent
    finally:
        worker.close(timeout_s=30)
    restarted = TrainingWorker(tmp_path / "runs")
    text = current_status(restarted)
    assert text.startswith(f"**finished** — `{run}`, step 6 / 6 · task **classification**"), text
    assert "newest fine-tuning run in the runs folder" in text and str(tmp_path) not in text
    first, _, _ = live_update(Services(tokenizer=tiny_tokenizer, worker=restarted), None)
    assert first[0] == text
    try:                                        # a newer run, stopped early: named as not finished, with its step
        restarted.start(fine_tuning_job(model, data, steps=100_000))
        deadline = time.monotonic() + 60
        while restarted.status().step < 1:
            assert time.monotonic() < deadline and restarted.status().active, restarted.status().message
            time.sleep(0.05)
        stopped = restarted.stop(wait_s=60)
        assert stopped.state == RunState.STOPPED and stopped.last_checkpoint is not None, stopped.message
    finally:
        restarted.close(timeout_s=30)
    text = current_status(TrainingWorker(tmp_path / "runs"))
    assert text.startswith(f"**not finished** — `{stopped.run_dir.name}`, step {stopped.step:,} / 100,000 "), text
    assert "**Continue a run**" in text


def summary(name: str, task: str | None, checkpoints: int = 1, step: int = 10, total: int | None = 10) -> RunSummary:
    return RunSummary(name, Path("/srv/runs") / name, checkpoints, step, total, task, None, 0.0)


def test_only_a_fine_tuning_run_with_a_checkpoint_is_named():
    runs = [summary("run-1", "pretraining"), summary("finetune-qa-2", "qa", checkpoints=0, step=0),
            summary("finetune-classification-3", "classification"), summary("finetune-qa-1", "qa")]
    assert newest_finetuning_run(runs).name == "finetune-classification-3"
    assert newest_finetuning_run(runs[:2]) is None
    assert finetune_status(WorkerStatus("idle", "no run"), None).startswith("**idle** — no run yet")
    unknown_total = earlier_run_status(summary("finetune-qa-1", "qa", step=7, total=None))
    assert unknown_total.startswith("**not finished** — `finetune-qa-1`, step 7 (its newest checkpoint)")
