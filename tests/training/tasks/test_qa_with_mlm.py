"""QA fine-tuning with the masked-LM / NSP objective kept alive (task ``qa_mlm``): the loss is the sum
of the three terms, every head and the encoder learn, batches pair deterministically, a run
resumes to the very weights of an uninterrupted one, and the command line refuses bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.finetune import main
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.tasks.qa_with_mlm import JointBatch, JointDataset
from engine.training.loop.config import TrainingConfig
from engine.training.runs.state import read_metrics
from engine.training.runs.run_folder import RunFolder
from support.finetune_helpers import save_tiny_model, write_squad

ARGS = ["--task", "qa_mlm", "--seq-len", "64", "--doc-stride", "16", "--max-question-len", "16",
        "--mlm-seq-len", "32", "--batch-size", "4", "--lr", "3e-3", "--warmup", "0", "--threads", "1",
        "--no-progress"]

pytestmark = pytest.mark.usefixtures("one_thread")   # the CLI runs pass --threads 1 too


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    """A tiny MLM+NSP model, a tiny QA-only model, 8 SQuAD contexts and a 12-document corpus."""
    root = tmp_path_factory.mktemp("qa_mlm")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(" . ".join(f"the {a} saw the {b} and it was red" for b in ("cat", "dog", "car"))
                                  for a in ("bird", "tree", "house", "model", "man", "woman", "boy", "girl",
                                            "city", "river", "king", "queen")) + "\n")
    return {"model": save_tiny_model(root / "model", tiny_tokenizer),
            "qa_only": save_tiny_model(root / "qa-only", tiny_tokenizer, heads=("qa",)),
            "squad": write_squad(root / "squad.json", num_contexts=8), "corpus": corpus, "root": root}


def trainer_of(spec: JobSpec):
    """The job's trainer (``prepare_job``, the path every front end takes)."""
    return prepare_job(spec).trainer


def options(files, run_dir: Path, mlm_batch_size: int | None = None, **training) -> JobSpec:
    values = dict(task="qa_mlm", learning_rate=3e-3, warmup_steps=0, total_steps=30, batch_size=4, max_seq_length=64,
                  eval_every=15, eval_batches=0, checkpoint_every=0)
    values.update(training)
    return JobSpec(TrainingConfig(**values), data=str(files["squad"]), eval_fraction=0.25,
                           init_from=str(files["model"]), run_dir=str(run_dir),
                           task_settings=dict(doc_stride=16, max_question_len=16, mlm_corpus=str(files["corpus"]),
                                              mlm_seq_len=32, mlm_batch_size=mlm_batch_size))


def loss_of_parts(model, batch: JointBatch) -> float:
    """The pretraining loss (MLM + NSP) of the batch's text part plus the QA loss of its features,
    each computed by the model on its own."""
    text, qa = batch.pretraining, batch.qa
    with torch.no_grad():
        return float(model(**text.model_inputs(), sparse_mlm=True).loss
                     + model(qa.input_ids, attention_mask=qa.attention_mask, token_type_ids=qa.token_type_ids,
                             start_positions=qa.start_positions, end_positions=qa.end_positions,
                             compute=("qa",)).loss)


@pytest.fixture(scope="module")
def run(files):
    trainer = trainer_of(options(files, files["root"] / "run"))
    events: list[tuple[str, dict]] = []
    assert trainer.train(callback=lambda kind, record: events.append((kind, record))).status == "finished"
    return trainer, [r for k, r in events if k == "train"], [r for k, r in events if k == "eval"]


def test_loss_is_the_sum_of_mlm_nsp_and_qa_and_all_three_learn(run):
    trainer, records, evals = run
    for r in records:
        assert r["loss"] == pytest.approx(r["mlm_loss"] + r["nsp_loss"] + r["qa_loss"], rel=1e-5)
    first, last = records[0], records[-1]
    assert last["qa_loss"] < first["qa_loss"] / 2 and last["mlm_loss"] < first["mlm_loss"] * 0.8
    assert {"eval_mlm_acc", "eval_nsp_acc", "eval_span_acc", "eval_qa_loss"} <= set(evals[-1])
    assert evals[-1]["eval_mlm_loss"] < evals[0]["eval_mlm_loss"] + 1.0    # held-out text, evaluated each time


def test_every_head_and_the_encoder_train_and_are_saved(run, files):
    trainer, _, _ = run
    checkpoint = RunFolder(trainer.run_dir).checkpoints()[0].path
    saved, base = load_directory(checkpoint), load_directory(files["model"])
    assert saved.heads == ("mlm", "nsp", "qa")
    before, after = base.model.state_dict(), saved.model.state_dict()
    for key in ("cls.predictions.transform.dense.weight", "cls.predictions.bias", "cls.seq_relationship.weight",
                "bert.pooler.dense.weight", "bert.encoder.layer.0.attention.self.query.weight"):
        assert not torch.equal(after[key], before[key]), key      # QA alone would leave the first four untouched


def test_step_loss_matches_the_two_tasks_computed_apart(files):
    """One step's loss on a batch = the pretraining loss (MLM + NSP) of its text part + the QA loss of
    its features, each computed by the model on its own (dropout off)."""
    trainer = trainer_of(options(files, files["root"] / "apart"))
    trainer.model.eval()                                    # no dropout: the same numbers twice
    batch = trainer.train_data.batch(0, 0)
    expected = loss_of_parts(trainer.model, batch)          # before the step changes the weights
    assert trainer.step([batch])["loss"] == pytest.approx(expected, rel=1e-5)


def test_joint_batches_pair_deterministically_and_wrap_the_text_epochs(run):
    trainer, _, _ = run
    data: JointDataset = trainer.train_data
    per_epoch = data.num_batches(0)
    text_batches = data.pretraining.num_batches(0)
    assert data.pretraining_position(text_batches) == (1, 0)                # the text runs on into its next epoch
    count = 3 * per_epoch + 1
    epoch, index = data.pretraining_position(count)
    later = data.batch(3, 1)
    assert isinstance(later, JointBatch)
    assert torch.equal(later.pretraining.input_ids, data.pretraining.batch(epoch, index).input_ids)
    assert torch.equal(later.qa.input_ids, data.qa.batch(3, 1).input_ids)
    assert torch.equal(data.batch(3, 1).pretraining.labels, later.pretraining.labels)    # same masks again


def test_cli_trains_resumes_exactly_and_records_the_corpus(files, tmp_path, capsys):
    common = [*ARGS, "--data", str(files["squad"]), "--eval-fraction", "0.25", "--mlm-corpus", str(files["corpus"]),
              "--init-from", str(files["model"]), "--steps", "4", "--checkpoint-every", "2"]
    assert main([*common, "--run-dir", str(tmp_path / "straight")]) == 0, capsys.readouterr().err[-2000:]
    err = capsys.readouterr().err
    assert "qa_mlm" in err and "documents for the masked-LM term" in err and "heads mlm, nsp, qa" in err
    run = json.loads((tmp_path / "straight" / "run.json").read_text())
    assert run["task"] == "qa_mlm" and run["task_settings"]["mlm_corpus"] == str(files["corpus"])
    assert run["task_settings"]["mlm_seq_len"] == 32

    assert main([*common, "--stop-at", "2", "--run-dir", str(tmp_path / "chunks")]) == 0
    assert main(["--resume", str(tmp_path / "chunks"), "--threads", "1", "--no-progress"]) == 0
    assert "resuming" in capsys.readouterr().err

    def losses(name: str) -> list[float]:
        return [value for r in read_metrics(tmp_path / name / "metrics.jsonl") if r["kind"] == "train"
                for value in (r["step"], r["mlm_loss"], r["qa_loss"])]
    assert losses("chunks")[::3] == [1, 2, 3, 4]
    assert losses("chunks") == pytest.approx(losses("straight"), rel=1e-6)   # the same batches, same masks
    straight = load_directory(tmp_path / "straight" / "checkpoints" / "step-000004").model.state_dict()
    chunked = load_directory(tmp_path / "chunks" / "checkpoints" / "step-000004").model.state_dict()
    for key, value in straight.items():   # bit for bit: the same batches, masks, dropout and AdamW kernel
        assert torch.equal(chunked[key], value), key


def test_a_larger_text_batch_trains_beside_the_qa_batch_and_resumes_with_it(files, tmp_path, capsys):
    """--mlm-batch-size: each step holds that many text sequences beside --batch-size QA features, the
    loss still sums the two parts, and a resumed run keeps the text batch size it was started with."""
    common = [*ARGS, "--data", str(files["squad"]), "--eval-fraction", "0.25", "--mlm-corpus", str(files["corpus"]),
              "--init-from", str(files["model"]), "--mlm-batch-size", "8", "--checkpoint-every", "1"]
    assert main([*common, "--steps", "2", "--stop-at", "1", "--run-dir", str(tmp_path / "wide")]) == 0, \
        capsys.readouterr().err[-2000:]
    assert "text batch 8" in capsys.readouterr().err
    assert json.loads((tmp_path / "wide" / "run.json").read_text())["task_settings"]["mlm_batch_size"] == 8
    assert main(["--resume", str(tmp_path / "wide"), "--threads", "1", "--no-progress"]) == 0
    assert "text batch 8" in capsys.readouterr().err

    trainer = trainer_of(options(files, tmp_path / "apart", mlm_batch_size=8))
    batch = trainer.train_data.batch(0, 0)
    assert batch.qa.input_ids.shape[0] == 4 and batch.pretraining.input_ids.shape[0] == 8
    trainer.model.eval()
    expected = loss_of_parts(trainer.model, batch)          # before the step changes the weights
    assert trainer.step([batch])["loss"] == pytest.approx(expected, rel=1e-5)


def test_a_model_without_mlm_heads_gets_them(files, tmp_path, capsys):
    code = main([*ARGS, "--data", str(files["squad"]), "--mlm-corpus", str(files["corpus"]),
                 "--init-from", str(files["qa_only"]), "--steps", "1", "--run-dir", str(tmp_path / "fresh")])
    assert code == 0, capsys.readouterr().err[-2000:]
    assert load_directory(tmp_path / "fresh" / "checkpoints" / "step-000001").heads == ("mlm", "nsp", "qa")


@pytest.mark.parametrize("args, message", [
    (["--task", "qa_mlm", "--data", "SQUAD"], "--mlm-corpus is required: task qa_mlm needs the text"),
    (["--task", "qa", "--data", "SQUAD", "--mlm-corpus", "CORPUS"], "--mlm-corpus is for task qa_mlm, not qa"),
    (["--task", "qa_mlm", "--data", "SQUAD", "--mlm-corpus", "/nope.txt"], "--mlm-corpus: no such file"),
    (["--task", "qa_mlm", "--data", "SQUAD", "--mlm-corpus", "CORPUS", "--mlm-seq-len", "4"],
     "--mlm-seq-len must be >= 8"),
    (["--task", "qa_mlm", "--data", "SQUAD", "--mlm-corpus", "CORPUS", "--mlm-batch-size", "0"],
     "--mlm-batch-size must be >= 1"),
    (["--task", "qa", "--data", "SQUAD", "--mlm-batch-size", "16"], "--mlm-batch-size is for task qa_mlm, not qa"),
])
def test_bad_arguments_exit_2_with_the_reason(files, args, message, capsys):
    args = [str(files["squad"]) if a == "SQUAD" else str(files["corpus"]) if a == "CORPUS" else a for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_an_empty_corpus_is_refused_before_training(files, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    code = main([*ARGS, "--data", str(files["squad"]), "--mlm-corpus", str(empty), "--init-from", str(files["model"]),
                 "--steps", "1", "--run-dir", str(tmp_path / "empty-run")])
    assert code == 2 and "error:" in capsys.readouterr().err
    assert not any((tmp_path / "empty-run").rglob("step-*"))
