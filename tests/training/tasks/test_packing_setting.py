"""The ``packing`` pretraining setting (RoBERTa's input formats) as a user meets it: a ``--packing`` flag of
``python -m engine.pretrain`` that trains, is kept in ``run.json``, resumes exactly with the run's own packing and
may not be changed on a resume; combinations that cannot work are refused with a sentence naming the flag."""
from __future__ import annotations

import json

import pytest
import torch

from engine.pretrain import build_parser, main, spec_from_args
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.tasks.pretraining_settings import PretrainingSettings
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def test_a_full_sentences_run_keeps_its_packing_and_resumes_exactly(tmp_path, tokenizer_dir):
    spec = pretraining(tmp_path, tokenizer_dir, nsp=False).replace(task_settings={"packing": "full-sentences"})
    straight = prepare_job(spec.replace(run_dir=str(tmp_path / "straight"))).trainer
    straight.train()
    first = prepare_job(spec).trainer
    first.train(num_steps=3)
    assert first.train_data.objective.packing == "full-sentences"
    assert any(inst.separators_a for inst in first.train_data.instances(0))     # the documents are joined
    run = RunFolder(tmp_path / "run")
    assert json.loads(run.spec_path.read_text())["task_settings"]["packing"] == "full-sentences"
    assert resume_spec(run.root).settings == PretrainingSettings(packing="full-sentences")
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run.root))).trainer
    assert resumed.global_step == 3 and resumed.train_data.objective.packing == "full-sentences"
    resumed.train()
    for (name, mine), theirs in zip(resumed.model.state_dict().items(), straight.model.state_dict().values()):
        assert torch.equal(mine, theirs), name


def test_the_flag_is_read_checked_and_fixed_once_a_run_exists(tmp_path, capsys):
    parser = build_parser()
    args = parser.parse_args(["--packing", "doc-sentences", "--no-nsp"])
    assert spec_from_args(args, parser).settings == PretrainingSettings(packing="doc-sentences")
    assert spec_from_args(parser.parse_args([]), parser).settings.packing == "segment-pair"
    for argv, words in ((["--packing", "full-sentences"], "turn next-sentence prediction off (--no-nsp)"),
                        (["--packing", "sentence-pair", "--no-nsp"], "keep next-sentence pairs on"),
                        (["--packing", "sentences"], "must be one of segment-pair, sentence-pair, full-sentences"),
                        (["--packing", "full-sentences", "--no-nsp", "--pair-task", "sop"],
                         "--pair-task sop (sentence order) swaps"),
                        (["--resume", str(tmp_path), "--packing", "doc-sentences"], "cannot change --packing")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and words in capsys.readouterr().err, argv
