"""Fine-tuning through the shared Trainer: QA and classification learn, resume exactly, keep every head,
export to transformers, freeze the encoder; ``python -m engine.finetune`` end to end and its errors."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch

from support.cli_helpers import torchrun
from engine.checkpoints.hf_format import load_directory
from engine.finetune import main
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.loop.trainer import Trainer
from engine.training.loop.config import TrainingConfig
from engine.training.runs.state import read_metrics
from engine.training.runs.run_folder import RunFolder
from support.finetune_helpers import classification_rows, save_tiny_model, word_tokenizer, write_csv, write_squad
from support.hf_checkpoints import assert_transformers_agrees

ROOT = Path(__file__).resolve().parents[3]
SENTIMENT = ROOT / "assets" / "examples" / "sentiment.csv"
QA_KEYS = {"step", "qa_loss", "start_acc", "end_acc", "span_acc", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed"}
QA_EVAL_KEYS = {"step", "eval_qa_loss", "eval_start_acc", "eval_end_acc", "eval_span_acc", "eval_exact_match",
                "eval_f1", "eval_questions"}
CLASSIFICATION_KEYS = {"step", "classification_loss", "accuracy", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed"}
QA_ARGS = ["--task", "qa", "--seq-len", "64", "--doc-stride", "16", "--max-question-len", "16", "--threads", "1",
           "--no-progress"]

pytestmark = pytest.mark.usefixtures("one_thread")   # the CLI runs pass --threads 1 too


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    """A tiny MLM+NSP model (dropout on), 8 SQuAD contexts and 16 classification rows."""
    root = tmp_path_factory.mktemp("finetune")
    return {"model": save_tiny_model(root / "model", tiny_tokenizer),
            "squad": write_squad(root / "squad.json", num_contexts=8),
            "csv": write_csv(root / "classes.csv", classification_rows(16)), "root": root}


def qa_config(**overrides) -> TrainingConfig:
    values = dict(task="qa", learning_rate=3e-3, warmup_steps=3, total_steps=60, batch_size=8, max_seq_length=64,
                  eval_every=30, eval_batches=0, checkpoint_every=0, nsp=False)
    values.update(overrides)
    return TrainingConfig(**values)


def options(files: dict[str, Path], run_dir: Path, training: TrainingConfig, **overrides) -> JobSpec:
    values = dict(data=str(files["squad" if training.task == "qa" else "csv"]), eval_fraction=0.0,
                  init_from=str(files["model"]), run_dir=str(run_dir),
                  task_settings=dict(doc_stride=16, max_question_len=16) if training.task == "qa" else {})
    values.update(overrides)
    return JobSpec(training, **values)


def trainer_of(spec: JobSpec) -> Trainer:
    """The job's trainer (``prepare_job``, the path every front end takes)."""
    return prepare_job(spec).trainer


def train(trainer: Trainer) -> tuple[list[dict], list[dict]]:
    events: list[tuple[str, dict]] = []
    assert trainer.train(callback=lambda kind, record: events.append((kind, record))).status == "finished"
    return [r for k, r in events if k == "train"], [r for k, r in events if k == "eval"]


@pytest.fixture(scope="module")
def qa_run(files) -> tuple[Trainer, list[dict], list[dict]]:
    trainer = trainer_of(options(files, files["root"] / "qa-run", qa_config(), eval_fraction=0.25))
    return (trainer, *train(trainer))


@pytest.fixture(scope="module")
def classification_run(files) -> tuple[Trainer, list[dict], list[dict]]:
    config = qa_config(task="classification", total_steps=40, eval_every=20)
    trainer = trainer_of(options(files, files["root"] / "classification-run", config, eval_fraction=0.25))
    return (trainer, *train(trainer))


# ---------------------------------------------------------------------------- learning
def test_qa_reaches_full_train_accuracy_and_keeps_the_pretraining_heads(qa_run, files):
    trainer, records, evals = qa_run
    assert len(trainer.train_data) == 6 and len(trainer.eval_data) == 2        # 2 of 8 contexts held out
    assert all(set(r) == QA_KEYS for r in records) and [set(r) for r in evals] == [QA_EVAL_KEYS] * 2
    assert records[-1]["loss"] == pytest.approx(records[-1]["qa_loss"])
    assert min(r["span_acc"] for r in records[-5:]) >= 0.85, records[-5:]
    assert records[-1]["qa_loss"] < records[0]["qa_loss"] / 5
    trained = optimized(trainer)      # the word embeddings (= the MLM decoder weight) train; unused heads do not
    assert {"bert.embeddings.word_embeddings.weight", "qa_outputs.weight"} <= trained
    assert not any(name.startswith(("cls.", "bert.pooler.")) for name in trained)
    checkpoint = RunFolder(trainer.run_dir).checkpoints()[0].path
    saved, base = load_directory(checkpoint), load_directory(files["model"])
    assert saved.heads == ("mlm", "nsp", "qa")
    assert json.loads((checkpoint / "config.json").read_text())["architectures"] == [
        "BertForPreTraining", "BertForQuestionAnswering"]
    before, after = base.model.state_dict(), saved.model.state_dict()
    # QA does not run the MLM/NSP heads: their own weights are untouched; the encoder moved
    for key in ("cls.predictions.transform.dense.weight", "cls.predictions.bias", "cls.seq_relationship.weight"):
        assert torch.equal(after[key], before[key]), key
    assert not torch.equal(after["bert.encoder.layer.0.attention.self.query.weight"],
                           before["bert.encoder.layer.0.attention.self.query.weight"])


def test_classification_reaches_full_train_accuracy(classification_run):
    trainer, records, evals = classification_run
    assert all(set(r) == CLASSIFICATION_KEYS for r in records)
    assert set(evals[-1]) == {"step", "eval_classification_loss", "eval_accuracy"} and evals[-1]["step"] == 40
    assert min(r["accuracy"] for r in records[-5:]) == 1.0, records[-5:]
    assert trainer.model.config.id2label == {0: "animal", 1: "thing"}
    assert load_directory(RunFolder(trainer.run_dir).checkpoints()[0].path).heads == ("mlm", "nsp", "classifier")


# ---------------------------------------------------------------------------- transformers
def test_qa_checkpoint_loads_in_transformers_with_the_same_logits(qa_run):
    transformers = pytest.importorskip("transformers")
    trainer = qa_run[0]
    checkpoint = RunFolder(trainer.run_dir).checkpoints()[0].path
    ours = load_directory(checkpoint).model.eval()
    batch = trainer.eval_data.batch(0, 0)
    inputs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids)
    hf, info = transformers.BertForQuestionAnswering.from_pretrained(checkpoint, output_loading_info=True)
    assert not info["missing_keys"] and not info.get("mismatched_keys")
    with torch.no_grad():
        mine, theirs = ours(**inputs), hf.eval()(**inputs)
    torch.testing.assert_close(mine.qa.start_logits, theirs.start_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(mine.qa.end_logits, theirs.end_logits, rtol=0, atol=1e-5)
    pretraining, info = transformers.BertForPreTraining.from_pretrained(checkpoint, output_loading_info=True)
    assert not info["missing_keys"]                                           # the MLM and NSP heads came along


def test_classification_checkpoint_loads_in_transformers_with_its_labels(classification_run):
    transformers = pytest.importorskip("transformers")
    trainer = classification_run[0]
    checkpoint = RunFolder(trainer.run_dir).checkpoints()[0].path
    hf = assert_transformers_agrees(checkpoint, transformers.BertForSequenceClassification,
                                    trainer.eval_data.batch(0, 0), "classifier")
    assert hf.config.id2label == {0: "animal", 1: "thing"} and hf.config.label2id == {"animal": 0, "thing": 1}


# ---------------------------------------------------------------------------- resume, freezing
def test_resume_gives_the_same_next_step(files, tmp_path):
    config = qa_config(total_steps=10, batch_size=4, gradient_accumulation_steps=2, checkpoint_every=3, eval_every=3)
    first = trainer_of(options(files, tmp_path / "run", config, eval_fraction=0.25))
    first.train(num_steps=3)
    assert first.epoch >= 1                                                  # past an epoch boundary
    expected = first.step()                                                  # the uninterrupted step 4
    after = {n: p.detach().clone() for n, p in first.model.named_parameters()}
    torch.manual_seed(99)
    resumed = trainer_of(JobSpec({"total_steps": 10}, resume_from=str(tmp_path / "run")))
    assert resumed.global_step == 3 and resumed.config.gradient_accumulation_steps == 2
    got = resumed.step()
    assert got["loss"] == expected["loss"] and got["span_acc"] == expected["span_acc"]
    for name, param in resumed.model.named_parameters():
        torch.testing.assert_close(param, after[name], rtol=0, atol=1e-6, msg=name)
    with pytest.raises(ValueError, match="is a qa run, not classification"):
        trainer_of(JobSpec({"task": "classification"}, resume_from=str(tmp_path / "run")))
    with pytest.raises(ValueError, match="cannot change batch_size, gradient_accumulation_steps when resuming"):
        trainer_of(JobSpec(qa_config(total_steps=10), resume_from=str(tmp_path / "run")))


def optimized(trainer: Trainer) -> set[str]:
    """Names of the parameters the trainer's optimizer updates."""
    ids = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    return {name for name, param in trainer.model.named_parameters() if id(param) in ids}


def test_freeze_encoder_trains_only_heads_and_pooler(files, tmp_path):
    config = qa_config(total_steps=4, eval_every=0, freeze_encoder=True, learning_rate=1e-2)
    trainer = trainer_of(options(files, tmp_path / "frozen", config))
    assert optimized(trainer) == {"qa_outputs.weight", "qa_outputs.bias"}    # QA runs no pooler, MLM or NSP
    classifier = trainer_of(options(files, tmp_path / "frozen-classifier", config.replace(task="classification")))
    assert optimized(classifier) == {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight",
                                     "classifier.bias"}
    assert not trainer.model.bert.embeddings.word_embeddings.weight.requires_grad   # = the MLM decoder weight
    fresh_qa = trainer.model.qa_outputs.weight.detach().clone()
    train(trainer)
    before = load_directory(files["model"]).model.state_dict()
    after = load_directory(RunFolder(trainer.run_dir).checkpoints()[0].path).model.state_dict()
    for key, value in before.items():                      # the encoder and every head QA does not run
        assert torch.equal(after[key], value), key
    assert not torch.equal(after["qa_outputs.weight"], fresh_qa)              # the head did train


def test_pretraining_refits_mlm_with_frozen_encoder_and_keeps_the_qa_head(qa_run, files, tmp_path, capsys):
    from engine.pretrain import main as pretrain
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" . ".join(f"the {a} was red and the {b} ran" for b in ("cat", "dog", "car"))
                                  for a in ("bird", "tree", "house", "model")) + "\n")
    source = RunFolder(qa_run[0].run_dir).checkpoints()[0].path
    code = pretrain(["--corpus", str(corpus), "--init-from", str(qa_run[0].run_dir), "--freeze-encoder",
                     "--seq-len", "32", "--batch-size", "4", "--steps", "3", "--lr", "1e-2", "--warmup", "0",
                     "--eval-fraction", "0", "--run-dir", str(tmp_path / "refit"), "--threads", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err[-2000:]
    assert "encoder frozen" in capsys.readouterr().err
    before = load_directory(source).model.state_dict()
    refit = load_directory(tmp_path / "refit" / "checkpoints" / "step-000003")
    assert refit.heads == ("mlm", "nsp", "qa")
    after = refit.model.state_dict()
    for key, value in before.items():
        if key.startswith(("bert.embeddings.", "bert.encoder.", "qa_outputs.")):
            assert torch.equal(after[key], value), key
    assert not torch.equal(after["cls.predictions.transform.dense.weight"],
                           before["cls.predictions.transform.dense.weight"])


# ---------------------------------------------------------------------------- command line
def test_cli_qa_end_to_end_and_resume(files, tmp_path, capsys):
    run_dir = tmp_path / "qa"
    args = [*QA_ARGS, "--data", str(files["squad"]), "--init-from", str(files["model"]), "--steps", "4",
            "--batch-size", "4", "--eval-fraction", "0.25", "--checkpoint-every", "2", "--max-examples", "6",
            "--run-dir", str(run_dir), "--keep-optimizer-state", "newest"]   # a finished fine-tune that may go on
    assert main(args) == 0, capsys.readouterr().err[-2000:]
    err = capsys.readouterr().err
    assert "6 questions" not in err and "8 questions; skipped 0 answer(s)" in err
    assert "heads mlm, nsp, qa" in err and "training features from 4 examples" in err
    run = json.loads((run_dir / "run.json").read_text())
    assert run["task"] == "qa" and run["max_examples"] == 6 and run["task_settings"]["doc_stride"] == 16
    assert [c.step for c in RunFolder(run_dir).checkpoints()] == [4, 2]
    assert main(["--resume", str(run_dir), "--steps", "6", "--threads", "1", "--no-progress"]) == 0
    assert "resuming" in capsys.readouterr().err
    records = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert set(records[-1]) >= {"kind", "step"} and (run_dir / "checkpoints" / "step-000006").is_dir()


def test_cli_fine_tunes_the_sentiment_example(tmp_path, capsys):
    from engine.data.classification import read_classification_file
    texts = [e.text for e in read_classification_file(SENTIMENT)]
    model = save_tiny_model(tmp_path / "model", word_tokenizer(texts))
    run_dir = tmp_path / "sentiment"
    code = main(["--task", "classification", "--data", str(SENTIMENT), "--init-from", str(model), "--steps", "60",
                 "--batch-size", "16", "--lr", "3e-3", "--warmup", "3", "--eval-fraction", "0.2",
                 "--eval-every", "60", "--run-dir", str(run_dir), "--threads", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err[-2000:]
    assert "labels ['negative', 'positive']" in capsys.readouterr().err
    train_records = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert sum(r["accuracy"] for r in train_records[-5:]) / 5 >= 0.9, train_records[-5:]
    saved = load_directory(run_dir / "checkpoints" / "step-000060")
    assert saved.config.id2label == {0: "negative", 1: "positive"} and saved.heads == ("mlm", "nsp", "classifier")


def test_ctrl_c_saves_a_checkpoint(files, tmp_path, monkeypatch, capsys):
    real_step = Trainer.step

    def step_then_interrupt(self, *args, **kwargs):
        metrics = real_step(self, *args, **kwargs)
        if self.global_step == 2:
            signal.raise_signal(signal.SIGINT)
        return metrics
    monkeypatch.setattr(Trainer, "step", step_then_interrupt)
    run_dir = tmp_path / "interrupted"
    code = main(["--task", "classification", "--data", str(files["csv"]), "--init-from", str(files["model"]),
                 "--seq-len", "32", "--steps", "50", "--batch-size", "4", "--run-dir", str(run_dir), "--threads",
                 "1", "--no-progress"])
    assert code == 130
    assert "continue with: python -m engine.finetune --resume" in capsys.readouterr().err
    assert [c.step for c in RunFolder(run_dir).checkpoints()] == [2]


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("args, message", [
    (["--data", "/no/such/file.json"], "--data: no such file: /no/such/file.json"),
    (["--data", "SQUAD", "--eval-data", "SQUAD", "--eval-fraction", "0.1"], "either --eval-data or --eval-fraction"),
    (["--data", "SQUAD", "--doc-stride", "50"], "--doc-stride (50) must be smaller"),
    (["--data", "SQUAD", "--max-examples", "0"], "--max-examples must be >= 1"),
    (["--data", "SQUAD", "--lr", "-1"], "--lr must be a positive finite number"),
    (["--data", "SQUAD", "--eval-fraction", "1"], "--eval-fraction must be in [0, 1)"),
    (["--data", "SQUAD", "--seq-len", "1000"], "--seq-len (1000) is longer"),
    (["--task", "classification", "--data", "SQUAD"], "--doc-stride is for task qa or qa_mlm, not classification"),
    (["--task", "qa"], "--data is required"),
    (["--data", "SQUAD", "--task", "ner"], "invalid choice: 'ner'"),
])
def test_bad_arguments_exit_2(files, args, message, capsys, tmp_path):
    args = [str(files["squad"]) if a == "SQUAD" else a for a in args]
    code = exit_code([*QA_ARGS, *args, "--init-from", str(files["model"]), "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err[-2000:]


def test_missing_task_exits_2(capsys):
    with pytest.raises(SystemExit):
        main(["--data", str(SENTIMENT)])
    assert "--task is required" in capsys.readouterr().err


def _squad_with_wrong_starts(path: Path) -> Path:
    data = json.loads(write_squad(path).read_text())
    for paragraph in data["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            qa["answers"][0]["answer_start"] += 1
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("task, content, message", [
    ("qa", None, "has no usable questions (0 questions; skipped 4 answer(s)"),
    ("classification", "text,label\n", "has no examples"),
    ("classification", "text,label\nthe cat,a\nthe dog,a\n", "at least two different labels"),
    ("classification", "words,label\nthe cat,a\n", "missing text"),
])
def test_bad_data_exits_2_with_the_reason(files, tmp_path, task, content, message, capsys):
    path = tmp_path / ("data.json" if task == "qa" else "data.csv")
    if content is None:
        _squad_with_wrong_starts(path)
    else:
        path.write_text(content)
    args = QA_ARGS if task == "qa" else ["--task", task, "--seq-len", "32", "--threads", "1", "--no-progress"]
    code = main([*args, "--data", str(path), "--init-from", str(files["model"]), "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err[-2000:]


def test_bad_model_and_resume_exit_2(files, qa_run, tmp_path, capsys):
    code = main([*QA_ARGS, "--data", str(files["squad"]), "--init-from", str(tmp_path / "nope"),
                 "--run-dir", str(tmp_path / "run")])
    assert code == 2 and "no model directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--resume", str(qa_run[0].run_dir), "--lr", "0.1", "--seq-len", "32"])
    assert "cannot change --lr, --seq-len when resuming" in capsys.readouterr().err


def test_torchrun_two_gloo_processes_fine_tune_to_identical_weights(tmp_path):
    """``torchrun -m engine.finetune``: DistributedDataParallel on CPU (gloo), 2 processes; both ranks
    end with the same weights, only rank 0 logs and writes the checkpoint."""
    from engine.data.classification import read_classification_file
    texts = [e.text for e in read_classification_file(SENTIMENT)]
    model = save_tiny_model(tmp_path / "model", word_tokenizer(texts))
    run_dir = tmp_path / "ddp"
    result = torchrun("engine.finetune", [
        "--task", "classification", "--data", str(SENTIMENT), "--init-from", str(model), "--steps", "3",
        "--batch-size", "4", "--lr", "3e-3", "--warmup", "1", "--eval-fraction", "0.2", "--run-dir", str(run_dir),
        "--threads", "1", "--no-progress", "--debug-dump-weights"])
    assert result.returncode == 0, result.stderr[-3000:]
    rank0 = torch.load(run_dir / "weights-rank0.pt", weights_only=True)
    rank1 = torch.load(run_dir / "weights-rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    initial = load_directory(model).model.state_dict()
    assert any(not torch.equal(rank0[k], initial[k]) for k in initial if k in rank0)   # it did train
    assert {"classifier.weight", "classifier.bias"} <= set(rank0)                         # the new head too
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"] == [1, 2, 3]
    saved = load_directory(run_dir / "checkpoints" / "step-000003").model.state_dict()
    assert all(torch.equal(saved[k], rank0[k]) for k in saved)


def test_torchrun_two_gloo_processes_fine_tune_qa_and_rank_0_scores_the_answers(files, tmp_path):
    """QA under ``torchrun``: both ranks hold the same weights; only rank 0 evaluates, and its records
    carry the held-out answers' exact match and F1."""
    run_dir = tmp_path / "ddp-qa"
    result = torchrun("engine.finetune", [
        *QA_ARGS, "--data", str(files["squad"]), "--init-from", str(files["model"]), "--steps", "4",
        "--batch-size", "4", "--lr", "3e-3", "--warmup", "1", "--eval-fraction", "0.25", "--eval-every", "2",
        "--run-dir", str(run_dir), "--debug-dump-weights"])
    assert result.returncode == 0, result.stderr[-3000:]
    rank0 = torch.load(run_dir / "weights-rank0.pt", weights_only=True)
    rank1 = torch.load(run_dir / "weights-rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys() and all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    evals = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4] and all(set(r) - {"kind"} == QA_EVAL_KEYS for r in evals)
