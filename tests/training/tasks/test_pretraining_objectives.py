"""Pretraining's own settings (objective, mask mix, static masking) as a user meets them: a left-to-right run learns,
its predictions never read later tokens, the settings are flags kept in ``run.json`` that a resume keeps and may not
change, bad values are refused naming the flag, and a run written before the settings existed still resumes."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import transformers

from engine.data.masking import IGNORE_INDEX
from engine.model.families.registry import config_from_dict
from engine.model.heads import BertWithHeads
from engine.pretrain import build_parser, main, spec_from_args
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.tasks.pretraining import PretrainingTask
from engine.training.tasks.pretraining_settings import PretrainingSettings
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")
CLM = {"objective": "clm"}


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def test_a_left_to_right_run_learns_and_logs_next_token_metrics(tmp_path, tokenizer_dir):
    spec = pretraining(tmp_path, tokenizer_dir, nsp=False, total_steps=25, eval_every=25, eval_batches=2,
                       checkpoint_every=0, learning_rate=3e-3).replace(task_settings=CLM)
    job = prepare_job(spec)
    trainer = job.trainer
    assert trainer.model.heads == ("mlm",) and not trainer.model.has_pooler
    assert trainer.model.cls.predictions.decoder.weight is trainer.model.bert.embeddings.word_embeddings.weight
    before = trainer.evaluate()
    train = []
    trainer.train(callback=lambda kind, record: train.append(record) if kind == "train" else None)
    after = trainer.evaluate()
    first, last = (sum(r["mlm_loss"] for r in part) / 5 for part in (train[:5], train[-5:]))
    assert last < first - 0.3, (first, last)
    assert after["eval_next_token_loss"] < before["eval_next_token_loss"] - 0.5
    assert after["eval_next_token_acc"] == after["eval_mlm_acc"] > before["eval_next_token_acc"]
    assert train[-1]["next_token_loss"] == train[-1]["mlm_loss"] and train[-1]["nsp_loss"] is None

    # the task's forward attends left to right: the last real token of each row changes no prediction
    batch = trainer.train_data.batch(0, 0)
    changed = dataclasses.replace(batch, input_ids=batch.input_ids.clone())
    last = batch.attention_mask.sum(1) - 1                                             # (B,) the closing [SEP]
    changed.input_ids[torch.arange(len(last)), last] = 7
    net = trainer.model.eval()
    with torch.no_grad():
        logits = [trainer.task.forward(net, b, trainer.config).mlm.logits for b in (batch, changed)]
        both_ways = [PretrainingTask(trainer.config).forward(net, b, trainer.config).mlm.logits
                     for b in (batch, changed)]
    assert (batch.labels != IGNORE_INDEX).sum() == len(logits[0])
    assert torch.equal(logits[0], logits[1])
    assert not torch.equal(both_ways[0], both_ways[1])        # the masked LM's attention sees the last token


def test_settings_are_kept_in_run_json_and_a_resume_rebuilds_the_same_static_masks(tmp_path, tokenizer_dir):
    settings = {"mask_mix": "0.5, 0.25, 0.25", "static_masking": True}
    spec = pretraining(tmp_path, tokenizer_dir).replace(task_settings=settings)
    straight = prepare_job(spec.replace(run_dir=str(tmp_path / "straight"))).trainer
    straight.train()
    prepare_job(spec).trainer.train(num_steps=3)
    run = RunFolder(tmp_path / "run")
    recorded = json.loads(run.spec_path.read_text())["task_settings"]
    assert recorded == {"objective": "mlm", "mask_mix": "0.5,0.25,0.25", "static_masking": True, "pair_task": "nsp",
                        "generator_size": 0.25, "rtd_weight": 50.0, "packing": "segment-pair"}
    assert resume_spec(run.root).settings == PretrainingSettings(mask_mix="0.5,0.25,0.25", static_masking=True)
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run.root))).trainer
    assert resumed.global_step == 3 and resumed.task.objective.static
    resumed.train()
    for (name, mine), theirs in zip(resumed.model.state_dict().items(), straight.model.state_dict().values()):
        assert torch.equal(mine, theirs), name


def test_a_run_from_before_the_settings_resumes_with_bert_s_objective(tmp_path, tokenizer_dir):
    spec = pretraining(tmp_path, tokenizer_dir)
    prepare_job(spec).trainer.train(num_steps=3)
    run = RunFolder(tmp_path / "run")
    record = json.loads(run.spec_path.read_text())
    del record["task_settings"]                              # run.json as pretraining runs wrote it before
    run.spec_path.write_text(json.dumps(record))
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run.root))).trainer
    assert resumed.global_step == 3 and resumed.task.objective.is_default       # the data fingerprint matched
    assert resumed.train().step == 6


def test_the_command_line_reads_the_settings_and_a_resume_may_not_change_them(tmp_path, capsys):
    parser = build_parser()
    args = parser.parse_args(["--objective", "clm", "--no-nsp", "--steps", "5"])
    assert spec_from_args(args, parser).settings == PretrainingSettings(objective="clm")
    args = parser.parse_args(["--mask-mix", "1,0,0", "--static-masking"])
    assert spec_from_args(args, parser).task_settings == {"mask_mix": "1,0,0", "static_masking": True}
    for argv, words in ((["--objective", "clm"], "--objective clm (a left-to-right LM) reads one text per row"),
                        (["--mask-mix", "0.9,0.2,0"], "--mask-mix shares must add up to 1"),
                        (["--mask-mix", "0.8,0.2"], "--mask-mix must be three numbers"),
                        (["--objective", "gpt"], "--objective must be one of mlm, clm"),
                        (["--objective", "clm", "--no-nsp", "--whole-word"], "whole-word masking does not apply"),
                        (["--resume", str(tmp_path), "--static-masking"], "cannot change --static-masking")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and words in capsys.readouterr().err, argv


def test_left_to_right_needs_a_bert_layout_encoder(tiny_tokenizer):
    deberta = config_from_dict({"model_type": "deberta-v2", **transformers.DebertaV2Config(
        vocab_size=tiny_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=64).to_dict()})
    spec = JobSpec({"nsp": False}, task_settings=CLM)
    task = spec.definition.make_task(spec.training_config(), spec.task_settings)
    assert isinstance(task, PretrainingTask) and task.objective.causal
    with pytest.raises(ValueError, match="needs a BERT-layout encoder"):
        task.check(BertWithHeads(deberta, heads=("mlm",)), None, None, spec.training_config())
