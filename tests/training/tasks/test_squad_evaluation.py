"""SQuAD answers of a QA run's held-out questions (engine/training/tasks/squad_evaluation.py): the answers are
the QA pipeline's (engine.probes.heads.qa) on the run's windows, the null odds are what the reference scripts
compute from logits, and a run's evaluations report exact match and F1 (SQuAD v2.0: with the no-answer
threshold picked on the held-out questions, HasAns / NoAns) as fractions."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.data.qa_features import QAFeatureDataset, read_squad
from engine.probes.heads import squad_metric
from engine.probes.heads.qa import answer, answer_details
from engine.text.qa_windows import cut_question, encode_qa_windows
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.tasks.squad_evaluation import answer_held_out, squad_scores
from support.finetune_helpers import save_tiny_model, write_squad

pytestmark = pytest.mark.usefixtures("one_thread")
SEQ, STRIDE, QUESTION = 64, 16, 16


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("squad-eval")
    return {"root": root, "model": save_tiny_model(root / "model", tiny_tokenizer, heads=("qa",)),
            "v1": write_squad(root / "v1.json", num_contexts=8),
            "v2": write_squad(root / "v2.json", num_contexts=8, impossible=True)}


def run(files: dict[str, Path], data: str, name: str, steps: int = 24):
    config = TrainingConfig(task="qa", learning_rate=3e-3, warmup_steps=2, total_steps=steps, batch_size=8,
                            max_seq_length=SEQ, eval_every=steps // 2, eval_batches=0, checkpoint_every=0,
                            nsp=False)
    spec = JobSpec(config, data=str(files[data]), eval_fraction=0.25, init_from=str(files["model"]),
                   task_settings=dict(doc_stride=STRIDE, max_question_len=QUESTION), run_dir=str(files["root"] / name))
    trainer = prepare_job(spec).trainer
    evals: list[dict] = []
    trainer.train(callback=lambda kind, record: evals.append(record) if kind == "eval" else None)
    return trainer, evals


@pytest.fixture(scope="module")
def v2_run(files):
    return run(files, "v2", "v2-run")


def test_answers_are_the_pipelines_and_the_odds_its_null_against_its_best(files, tiny_tokenizer) -> None:
    loaded = load_directory(files["model"])
    loaded.model.eval()
    examples = read_squad(files["v2"]).examples
    answers = answer_held_out(loaded.model, loaded.tokenizer, examples, SEQ, STRIDE, QUESTION)
    assert [a.id for a in answers] == [e.id for e in examples]
    for example, found in zip(examples, answers):
        expected = answer(loaded, example.question, example.context, max_answer_len=30, max_seq_len=SEQ,
                          doc_stride=STRIDE)
        assert found.text == expected["answer"] and found.text
        details = answer_details(loaded, example.question, example.context, max_answer_len=30, max_seq_len=SEQ,
                                 doc_stride=STRIDE)
        assert found.null_odds == pytest.approx(math.log(details.null_score / details.best_span_score))


def test_null_odds_are_the_reference_scripts_logit_difference_in_one_window(files) -> None:
    """score_null - (start_logit + end_logit) of the best span, from the QA head's raw logits, when the
    context fits one window and the best span's text is not repeated (so no merged scores)."""
    loaded = load_directory(files["model"])
    loaded.model.eval()
    example = read_squad(files["v1"]).examples[0]
    details = answer_details(loaded, example.question, example.context, max_answer_len=30, max_seq_len=SEQ,
                             doc_stride=STRIDE)
    assert len(details.windows) == 1
    best = details.spans[0]
    window = encode_qa_windows(loaded.tokenizer, example.question, example.context, SEQ, STRIDE, QUESTION)[0]
    ids = torch.tensor([window.input_ids])                                     # (1, S)
    with torch.no_grad():
        out = loaded.model(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.tensor(
            [window.token_type_ids]), compute=("qa",)).qa
    start, end = out.start_logits[0], out.end_logits[0]                        # (S,) each
    assert best.merged == 1                                                   # no other span with its text
    reference = float(start[0] + end[0] - start[best.start_token] - end[best.end_token])
    [found] = answer_held_out(loaded.model, loaded.tokenizer, [example], SEQ, STRIDE, QUESTION)
    assert found.null_odds == pytest.approx(reference, abs=1e-4)


def test_a_long_question_is_cut_as_the_features_cut_it(tiny_tokenizer) -> None:
    question = "what was the cat " * 10
    cut = cut_question(tiny_tokenizer, question, 4)        # what answer_held_out asks, as the features do
    assert tiny_tokenizer.backend.encode(cut, add_special_tokens=False).tokens == \
        tiny_tokenizer.backend.encode(question, add_special_tokens=False).tokens[:4]
    assert cut_question(tiny_tokenizer, "what was it ?", 16) == "what was it ?"


def test_v1_runs_report_exact_match_and_f1_of_their_answers(files) -> None:
    trainer, evals = run(files, "v1", "v1-run")
    assert len(evals) == 2
    last = evals[-1]
    assert {"eval_exact_match", "eval_f1", "eval_questions"} <= set(last)
    assert not any(key.startswith(("eval_has_ans", "eval_no_ans", "eval_null")) for key in last)
    data = trainer.eval_data
    assert isinstance(data, QAFeatureDataset) and last["eval_questions"] == len(data.examples) == 2
    trainer.model.eval()
    answers = answer_held_out(trainer.model, trainer.tokenizer, data.examples, SEQ, STRIDE, QUESTION)
    golds = [(e.id, [t for t, _ in e.answers]) for e in data.examples]
    official = squad_metric.evaluate({a.id: a.text for a in answers}, golds)
    assert last["eval_exact_match"] == pytest.approx(official["exact_match"] / 100)
    assert last["eval_f1"] == pytest.approx(official["f1"] / 100)


def test_v2_runs_pick_the_null_threshold_and_report_has_ans_and_no_ans(v2_run) -> None:
    trainer, evals = v2_run
    last = evals[-1]
    keys = {"eval_exact_match", "eval_f1", "eval_null_threshold", "eval_has_ans_exact", "eval_has_ans_f1",
            "eval_no_ans_exact", "eval_no_ans_f1", "eval_has_ans_questions", "eval_no_ans_questions"}
    assert keys <= set(last)
    assert last["eval_has_ans_questions"] == last["eval_no_ans_questions"] == 2     # 2 contexts held out
    trainer.model.eval()
    examples = trainer.eval_data.examples
    answers = answer_held_out(trainer.model, trainer.tokenizer, examples, SEQ, STRIDE, QUESTION)
    scores = squad_scores(examples, answers)
    assert {k: last[f"eval_{k}"] for k in scores} == pytest.approx(scores)
    # the picked threshold is at least as good as answering everything or nothing
    golds = [(e.id, [t for t, _ in e.answers] if not e.is_impossible else []) for e in examples]
    predictions, odds = {a.id: a.text for a in answers}, {a.id: a.null_odds for a in answers}
    for threshold in (-math.inf, math.inf, 0.0):
        assert scores["f1"] >= squad_metric.evaluate_v2(predictions, golds, odds, threshold)["f1"] / 100 - 1e-9
    # and "no answer" is then predicted exactly for the questions whose odds are above it
    no_answer = {a.id for a in answers if a.null_odds > scores["null_threshold"]}
    right_empty = sum(1 for e in examples if e.is_impossible and e.id in no_answer)
    assert scores["no_ans_exact"] == pytest.approx(right_empty / 2)


def test_the_model_is_left_in_training_mode(v2_run) -> None:
    trainer, _ = v2_run
    trainer.model.train()
    trainer.evaluate()
    assert trainer.model.training
