"""engine.training.tasks.job_spec / jobs.setup: one spec for every training job, its checks, its record, and resume.

The command lines, the app's worker and the benches build trainers only through ``prepare_job``;
these tests use it the way they do: a new pretraining job, a new fine-tuning job, a resumed job
that continues bit for bit, and the refusals (bad settings, forbidden changes on resume).
"""
from __future__ import annotations

import json

import pytest
import torch

from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.jobs.setup import prepare_job
from engine.training.runs.resume_rules import RESUMABLE_FIELDS
from engine.training.runs.run_folder import RunFolder
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def test_a_new_pretraining_job_records_its_spec_and_tokenizer(tmp_path, tokenizer_dir, tiny_tokenizer):
    job = prepare_job(pretraining(tmp_path, tokenizer_dir))
    run = RunFolder(tmp_path / "run")
    assert job.trainer.run_dir == run.root and job.trainer.config.task == "pretraining"
    assert job.tokenizer.vocab_size == tiny_tokenizer.vocab_size
    assert set(job.trainer.model.heads) == {"mlm", "nsp"}
    record = json.loads(run.spec_path.read_text())
    assert record["task"] == "pretraining" and record["documents"] == 12 and record["corpus"] == "test words"
    assert "training" not in record and "run_dir" not in record        # the checkpoints hold the settings
    assert (run.tokenizer_dir / "vocab.txt").is_file()


def test_a_resumed_job_continues_bit_for_bit(tmp_path, tokenizer_dir):
    spec = pretraining(tmp_path, tokenizer_dir)
    straight = prepare_job(spec.replace(run_dir=str(tmp_path / "straight"))).trainer
    straight.train()
    first = prepare_job(spec).trainer
    first.train(num_steps=3)
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(tmp_path / "run")))
    assert resumed.checkpoint.name == "step-000003" and resumed.trainer.global_step == 3
    assert [r["step"] for r in resumed.history if r["kind"] == "train"] == [1, 2, 3]
    resumed.trainer.train()
    for (name, mine), theirs in zip(resumed.trainer.model.state_dict().items(), straight.model.state_dict().values()):
        assert torch.equal(mine, theirs), name


def test_resume_may_change_only_the_resumable_settings(tmp_path, tokenizer_dir):
    prepare_job(pretraining(tmp_path, tokenizer_dir)).trainer.train(num_steps=3)
    run = str(tmp_path / "run")
    longer = resume_spec(run, {"total_steps": 9, "eval_every": 0, "learning_rate": 1e-3})   # same lr: no change
    assert longer.training_config().total_steps == 9 and longer.training_config().eval_every == 0
    assert longer.run_dir == run and longer.tokenizer == str(tokenizer_dir) and longer.preset == "tiny"
    with pytest.raises(ValueError, match="cannot change batch_size, learning_rate when resuming"):
        resume_spec(run, {"learning_rate": 5e-4, "batch_size": 2})
    with pytest.raises(ValueError, match="is a pretraining run, not qa"):
        resume_spec(run, {"task": "qa"})
    with pytest.raises(ValueError, match="needs them given again"):      # uploaded text is not kept in the run
        prepare_job(JobSpec({"total_steps": 9}, resume_from=run))
    with pytest.raises(FileNotFoundError, match="no run or checkpoint directory"):
        resume_spec(tmp_path / "nowhere")
    assert {"total_steps", "device", "precision"} <= RESUMABLE_FIELDS and "learning_rate" not in RESUMABLE_FIELDS


def test_a_new_finetuning_job_starts_from_a_model_with_the_task_head(tmp_path, tiny_tokenizer):
    from support.finetune_helpers import classification_rows, save_tiny_model, write_csv

    model = save_tiny_model(tmp_path / "model", tiny_tokenizer)
    data = write_csv(tmp_path / "rows.csv", classification_rows(16))
    spec = JobSpec(TrainingConfig(task="classification", total_steps=2, batch_size=4, max_seq_length=32),
                   init_from=str(model), data=str(data), run_dir=str(tmp_path / "cls"))
    job = prepare_job(spec)
    assert "classifier" in job.trainer.model.heads and job.trainer.eval_data is not None     # 0.1 held out by default
    assert job.spec.held_out_fraction == 0.1
    assert json.loads(RunFolder(tmp_path / "cls").spec_path.read_text())["data"] == str(data)


@pytest.mark.parametrize("spec, message", [
    (JobSpec({"total_steps": 0}), "total_steps must be an integer >= 1"),
    (JobSpec({"nonsense": 1}), "unknown training setting"),
    (JobSpec(preset="huge"), "unknown preset 'huge'"),
    (JobSpec(corpus="/no/such/corpus.txt"), "no built-in corpus or file"),
    (JobSpec(vocab_size=3), "vocab_size must be at least 16"),
    (JobSpec(dropout=1.0), "dropout must be in [0, 1)"),
    (JobSpec({"max_seq_length": 1024}), "max_seq_length (1024) is longer"),
    (JobSpec(data="train.json"), "data are for fine-tuning tasks"),
    (JobSpec({"task": "qa"}), "data is required"),
    (JobSpec({"task": "qa"}, data="/no/such.json"), "data: no such file"),
    (JobSpec({"task": "qa_mlm"}, data=__file__), "mlm_corpus is required: task qa_mlm needs the text"),
    (JobSpec({"task": "classification"}, data="x.csv", task_settings={"mlm_corpus": "c.txt"}),
     "task classification has no settings of its own, got mlm_corpus"),
    (JobSpec({"task": "qa"}, data="x.json", task_settings={"mlm_corpus": "c.txt"}),
     "unknown setting(s) of task qa: mlm_corpus; its settings: doc_stride, max_question_len"),
    (JobSpec({"task": "qa"}, data="x.json", eval_data="y.json", eval_fraction=0.2), "either eval_data or"),
    (JobSpec(eval_fraction=1.0), "eval_fraction must be in [0, 1)"),
    (JobSpec(max_documents=0), "max_documents must be >= 1"),
])
def test_bad_specs_are_refused_before_anything_is_written(tmp_path, spec, message):
    spec = spec.replace(run_dir=str(tmp_path / "never"))
    with pytest.raises(ValueError) as info:
        prepare_job(spec)
    assert message in str(info.value)
    assert not (tmp_path / "never").exists()


def test_the_record_round_trips_and_reads_the_workers_older_spec_file():
    spec = JobSpec(TrainingConfig(task="qa"), init_from="default", data="train.json", max_examples=5,
                   task_settings={"doc_stride": 64})
    again = JobSpec.from_record(json.loads(json.dumps(spec.to_record())), spec.training_config())
    assert again == spec.replace(task_settings={"doc_stride": 64, "max_question_len": 64})     # every setting kept
    assert again.settings == spec.settings
    older = JobSpec.from_record({"preset": "mini", "tokenizer_dir": "/runs/x/tokenizer", "vocab_size": 4000,
                                 "training": {"batch_size": 1}, "someday": True}, TrainingConfig())
    assert (older.preset, older.tokenizer, older.vocab_size) == ("mini", "/runs/x/tokenizer", 4000)


def test_progress_reports_each_stage_and_can_cancel(tmp_path, tokenizer_dir, monkeypatch):
    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))          # a cold token cache
    said: list[str] = []
    assert prepare_job(pretraining(tmp_path, tokenizer_dir), lambda message: said.append(message) or True) is not None
    assert said[0].startswith("tokenising ") and said[-1] == "building the model"
    assert any(message.startswith("tokenising ") and " MB " in message for message in said), said
    again: list[str] = []                  # the same corpus and tokenizer: read from the cache, not tokenised again
    prepare_job(pretraining(tmp_path, tokenizer_dir).replace(run_dir=str(tmp_path / "again")),
                lambda message: again.append(message) or True)
    assert not any(" MB" in message for message in again), "nothing is read again"
    cancelled = prepare_job(pretraining(tmp_path, tokenizer_dir).replace(run_dir=str(tmp_path / "cancelled")),
                            lambda message: message != "building the model")
    assert cancelled is None and not (tmp_path / "cancelled").exists()
