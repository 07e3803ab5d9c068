"""Runs written before the checkpoint's small state file was renamed (``trainer_state.json`` ->
``explorer_state.json``) keep being listed, summarised, resumed, exported and offered in the picker.

The old run is a real one, written by today's code and turned back into the old layout: each checkpoint's
``explorer_state.json`` renamed to ``trainer_state.json`` (the same record: only the name changed), and
``run.json`` as it was.
"""
from __future__ import annotations

import json
import re

import pytest
import torch

from engine.training.runs.export import card_facts
from engine.training.tasks.job_spec import JobSpec, resume_spec
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_catalog import run_summaries
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import INFO_FILE, read_checkpoint_info
from engine.training.runs.legacy import LEGACY_INFO_FILE
from explorer.models.registry import ModelRegistry
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")


def to_old_layout(run: RunFolder) -> None:
    """Rename every checkpoint's state record to its old name."""
    for info in run.checkpoints():
        (info.path / INFO_FILE).rename(info.path / LEGACY_INFO_FILE)


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def test_an_old_run_is_listed_resumed_exported_and_picked(tmp_path, tokenizer_dir):
    spec = pretraining(tmp_path, tokenizer_dir).replace(run_dir=str(tmp_path / "runs" / "old"))
    straight = prepare_job(spec.replace(run_dir=str(tmp_path / "straight"))).trainer
    straight.train()
    prepare_job(spec).trainer.train(num_steps=3)
    run = RunFolder(tmp_path / "runs" / "old")
    to_old_layout(run)
    old = run.checkpoint_dir(3)
    assert not (old / INFO_FILE).exists() and json.loads((old / LEGACY_INFO_FILE).read_text())["step"] == 3

    # listed with its metrics, and summarised with its total (both read only the small record)
    [listed] = run.checkpoints()
    assert listed.step == 3 and listed.metrics["step"] == 3 and listed.eval_metrics["step"] == 3
    [summary] = run_summaries(tmp_path / "runs")
    assert (summary.step, summary.total_steps, summary.resumable) == (3, 6, True)
    assert read_checkpoint_info(old)["config"]["total_steps"] == 6
    assert card_facts(old).step == 3 and card_facts(old).total_steps == 6

    # in the picker, and it loads
    registry = ModelRegistry(runs_root=tmp_path / "runs", default_dir=None)
    key = "checkpoint:old/step-000003"
    assert key in registry.available_keys()
    loaded = registry.get(key)
    assert set(loaded.heads) == {"mlm", "nsp"} and re.match(r"old · step 3 · (held-out|batch) loss \d", registry.choices()[0].label)

    # resumed, bit for bit, and its new checkpoint has the new name beside the old one's
    assert resume_spec(run.root).training_config().total_steps == 6
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run.root)))
    assert resumed.trainer.global_step == 3
    resumed.trainer.train()
    for (name, mine), theirs in zip(resumed.trainer.model.state_dict().items(), straight.model.state_dict().values()):
        assert torch.equal(mine, theirs), name
    assert (run.checkpoint_dir(6) / INFO_FILE).is_file() and not (run.checkpoint_dir(6) / LEGACY_INFO_FILE).exists()
    assert [c.step for c in run.checkpoints()] == [6, 3] and all(c.metrics for c in run.checkpoints())


def test_a_hugging_face_trainer_state_is_not_taken_for_ours(tmp_path):
    (tmp_path / LEGACY_INFO_FILE).write_text(json.dumps({"global_step": 500, "log_history": [], "max_steps": 1000}))
    assert read_checkpoint_info(tmp_path) == {}
    (tmp_path / INFO_FILE).write_text(json.dumps({"step": 500, "config": {"total_steps": 1000}}))
    assert read_checkpoint_info(tmp_path)["step"] == 500
