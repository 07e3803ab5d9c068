"""The Fine-tune tab's words: the worker's run as this tab sees it, the table of held-out examples the model
gets wrong (only those, confidence as a percentage), and a live view that sends nothing twice."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from engine.training.tasks.eval_examples import EVAL_EXAMPLES, EvalExamples, ExamplePrediction
from engine.training.worker.training_worker import TrainingWorker
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune.live import LIVE_OUTPUTS, live_update
from explorer.finetune.status import MAX_CONTEXT_CHARS, finetune_status, wrong_note, wrong_rows
from explorer.services import Services


def status(state: str, task: str = "classification", **fields) -> WorkerStatus:
    base = dict(step=20, total_steps=40, run_dir=Path("/srv/runs/finetune-classification-1"), elapsed=10.0,
                metrics={"loss": 0.41234, "accuracy": 0.75}, task=task,
                eval_metrics={"step": 20, "eval_classification_loss": 0.5, "eval_accuracy": 0.8})
    base.update(fields)
    return WorkerStatus(state, "step 20 / 40", **base)


def prediction(i: int, correct: bool, context: str = "") -> ExamplePrediction:
    return ExamplePrediction(i, f"text {i}", context, "positive", "positive" if correct else "negative", 0.8771, correct)


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


def test_the_table_holds_the_wrong_examples_only():
    examples = EvalExamples(20, "classification", [prediction(0, True), prediction(1, False), prediction(2, False)])
    assert wrong_rows(examples) == [[2, "text 1", "positive", "negative", "87.7%"],
                                    [3, "text 2", "positive", "negative", "87.7%"]]
    assert wrong_note(status("running"), examples).startswith("Step 20: **2 of 3** wrong (all 3 held-out examples")
    right = EvalExamples(20, "classification", [prediction(i, True) for i in range(EVAL_EXAMPLES)])
    assert wrong_rows(right) == [] and "**none wrong**: the first 16 held-out examples are right" in wrong_note(
        status("running"), right)
    assert wrong_rows(None) == [] and "No evaluation yet" in wrong_note(status("running"), None)
    assert "no examples were held out" in wrong_note(status("finished"), None)


def test_a_qa_row_shows_the_question_and_a_cut_context():
    long = "word " * 100
    (row,) = wrong_rows(EvalExamples(5, "qa", [prediction(0, False, context=long)]))
    assert row[1].startswith("text 0 ‖ word") and row[1].endswith("…") and len(row[1]) == len("text 0 ‖ ") + MAX_CONTEXT_CHARS + 1


def test_the_live_view_sends_only_what_changed(tmp_path, tiny_tokenizer):
    services = Services(tokenizer=tiny_tokenizer, worker=TrainingWorker(tmp_path / "runs"))
    first, seen, active = live_update(services, None)
    assert len(first) == LIVE_OUTPUTS and not active
    assert first[0].startswith("**idle**") and first[1].layout.annotations[0].text == "Loss: no fine-tuning run yet"
    again, seen_again, _ = live_update(services, seen)
    assert seen_again == seen and all(isinstance(out, type(gr.skip())) for out in again)
