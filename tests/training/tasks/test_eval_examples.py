"""What a fine-tuning model predicts for its held-out examples (the Fine-tune tab's "gets wrong" table):
the predictions count right exactly what the task's own metric counts, name the file's labels and texts,
leave the model as they found it, and the worker keeps them after each evaluation of a fine-tuning run."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.training.loop.config import TrainingConfig
from engine.training.tasks.eval_examples import NO_ANSWER, WRONG_MARK, eval_examples
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.worker.training_worker import TrainingWorker
from support.finetune_helpers import (choice_csv, classification_rows, save_tiny_model, tagged_text, write_csv,
                                    write_squad)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("examples")
    files = {"model": save_tiny_model(root / "model", tiny_tokenizer),
             "squad": write_squad(root / "squad.json", num_contexts=8),
             "csv": write_csv(root / "classes.csv", classification_rows(24)), "root": root}
    (root / "tags.tsv").write_text(tagged_text(24), encoding="utf-8")
    (root / "choices.csv").write_text(choice_csv(24), encoding="utf-8")
    return {**files, "token_classification": root / "tags.tsv", "multiple_choice": root / "choices.csv"}


def job(files: dict[str, Path], task: str, run: str, steps: int = 6) -> JobSpec:
    training = TrainingConfig(task=task, learning_rate=3e-3, warmup_steps=1, total_steps=steps, batch_size=8,
                              max_seq_length=64, eval_every=3, eval_batches=0, checkpoint_every=0, nsp=False)
    data = files.get(task, files["squad" if task == "qa" else "csv"])
    return JobSpec(training, data=str(data), init_from=str(files["model"]),
                   eval_fraction=0.25, run_dir=str(files["root"] / run),
                   task_settings=dict(doc_stride=16, max_question_len=16) if task == "qa" else {})


@pytest.mark.parametrize("task, metric", [("classification", "eval_accuracy"), ("qa", "eval_span_acc"),
                                          ("multiple_choice", "eval_accuracy")])
def test_right_and_wrong_is_what_the_task_metric_counts(files, task: str, metric: str) -> None:
    trainer = prepare_job(job(files, task, f"{task}-metric")).trainer
    trainer.train()
    held_out = len(trainer.eval_data)
    found = eval_examples(trainer, limit=held_out)
    assert found is not None and found.task == task and found.step == trainer.global_step
    assert len(found.predictions) == held_out
    share = sum(p.correct for p in found.predictions) / held_out
    assert share == pytest.approx(trainer.evaluate()[metric])
    assert found.wrong == [p for p in found.predictions if not p.correct]
    assert all(0.0 <= p.confidence <= 1.0 for p in found.predictions)
    assert [p.index for p in found.predictions] == list(range(held_out))


def test_tagging_counts_words_as_its_metric_and_a_sentence_right_only_with_every_word(files) -> None:
    """Token classification is scored by word: the words marked right over all held-out sentences are the
    held-out word accuracy, a sentence is right exactly when none of its words is marked wrong, and each wrong
    word is one ``WordMistake`` (the word at its place, its label, the predicted tag and its probability)."""
    trainer = prepare_job(job(files, "token_classification", "tags-metric")).trainer
    trainer.train()
    found = eval_examples(trainer, limit=len(trainer.eval_data))
    assert found is not None and len(found.predictions) == len(trainer.eval_data)
    words = sum(p.words for p in found.predictions)
    right = sum(p.words_right for p in found.predictions)
    assert right / words == pytest.approx(trainer.evaluate()["eval_accuracy"])
    sentences = {" ".join(w for w, _ in (line.split("\t") for line in block.splitlines()))
                 for block in tagged_text(24).strip().split("\n\n")}
    wrong_words = sum(len(p.mistakes) for p in found.predictions)
    assert wrong_words == words - right and wrong_words > 0      # one mistake per word the metric counts wrong
    names = trainer.model.config.id2label
    for p in found.predictions:
        assert p.text in sentences and p.context == "" and p.text == " ".join(p.sentence)
        assert len(p.sentence) == p.words and len(p.mistakes) == p.words - p.words_right
        gold = [pair.rsplit("/", 1)[1] for pair in p.expected.split(" ")]
        for m in p.mistakes:                                     # the word at its place, its label, a wrong guess
            assert p.sentence[m.position] == m.word and gold[m.position] == m.expected != m.predicted
            assert m.predicted in names.values() and 1 / len(names) - 1e-6 <= m.confidence <= 1.0   # an arg-max
        marked = [i for i, pair in enumerate(p.predicted.split(" ")) if pair.endswith(WRONG_MARK)]
        assert [m.position for m in p.mistakes] == marked
        shown = p.predicted.split(" ")
        assert len(shown) == len(p.expected.split(" ")) == p.words
        assert sum(1 for w in shown if w.endswith(WRONG_MARK)) == p.words - p.words_right
        assert p.correct == (p.words_right == p.words) == (WRONG_MARK not in p.predicted)
        for want, got in zip(p.expected.split(" "), shown):      # the same word; the tag differs only when marked
            assert want.rsplit("/", 1)[0] == got.rsplit("/", 1)[0]
            assert (want == got) == (not got.endswith(WRONG_MARK))
        assert 0.0 <= p.confidence <= 1.0


def test_multiple_choice_rows_show_the_context_its_choices_and_the_picked_one(files) -> None:
    trainer = prepare_job(job(files, "multiple_choice", "choices-text")).trainer
    rows = [line.split(",") for line in choice_csv(24).splitlines()[1:]]
    right = {context: choices[int(label)] for context, *choices, label in rows}
    for p in eval_examples(trainer).predictions:
        number = int(p.expected.split(":")[0])
        assert p.expected == f"{number}: {right[p.text]}" and p.predicted in p.context.split(" · ")
        assert p.correct == (p.predicted == p.expected)


def test_classification_rows_name_the_files_texts_and_labels(files) -> None:
    trainer = prepare_job(job(files, "classification", "classification-text")).trainer
    rows = {text: label for text, label in classification_rows(24)}
    found = eval_examples(trainer, limit=3)
    assert len(found.predictions) == 3
    for p in found.predictions:
        assert rows[p.text] == p.expected and p.predicted in ("animal", "thing") and p.context == ""
        assert p.correct == (p.expected == p.predicted)


def test_qa_rows_show_the_question_the_window_and_the_answer_span(files) -> None:
    trainer = prepare_job(job(files, "qa", "qa-text")).trainer
    for p in eval_examples(trainer).predictions:
        assert p.text.startswith("what was the ") and p.text.endswith("?")
        assert p.expected == NO_ANSWER or (p.expected in ("red", "blue", "big", "small") and p.expected in p.context)


def test_the_model_is_left_as_it_was(files) -> None:
    trainer = prepare_job(job(files, "classification", "classification-mode")).trainer
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.train()
    eval_examples(trainer)
    assert trainer.model.training
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def test_pretraining_has_no_table(tmp_path, tiny_tokenizer) -> None:
    spec = JobSpec(dict(total_steps=2, batch_size=4, max_seq_length=32, eval_batches=1), preset="tiny",
                   model_overrides=dict(hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                        max_position_embeddings=64),
                   documents=[["the cat sat on the mat.", "the dog ran."]] * 12, vocab_size=200,
                   run_dir=str(tmp_path / "pretraining"))
    assert eval_examples(prepare_job(spec).trainer) is None


def test_the_worker_keeps_the_predictions_of_the_latest_evaluation(files, tmp_path) -> None:
    worker = TrainingWorker(tmp_path / "runs")
    try:
        worker.start(job(files, "classification", "unused").replace(run_dir=None))
        assert worker.join(60.0)
        st = worker.status()
        assert st.state == "finished", st.message
        assert st.task == "classification" and st.run_dir.name.startswith("classification-")
        found = worker.eval_examples()
        assert found is not None and found.step == st.step == 6 and st.examples_step == 6
        records, _ = worker.metrics_since(0)
        last_eval = [r for r in records if r["kind"] == "eval"][-1]
        share = sum(p.correct for p in found.predictions) / len(found.predictions)
        assert share == pytest.approx(last_eval["eval_accuracy"])   # held-out set (6 rows) < EVAL_EXAMPLES
    finally:
        worker.close(timeout_s=30)
