"""The Fine-tune tab with a RoBERTa base model (a random ``RobertaModel`` saved by transformers beside its byte-level
tokenizer): every task row makes its job, the sequence length is bounded by the positions less RoBERTa's offset,
and a tagging run started as *Start* starts it (``make_job`` + ``worker.start``) finishes with a checkpoint that
``RobertaForTokenClassification`` loads with nothing missing or unexpected."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import transformers

from engine.text.tokenizer import WordPieceTokenizer
from engine.training.runs.run_folder import RunFolder
from engine.training.worker.training_worker import TrainingWorker
from explorer.finetune.job import make_job
from explorer.finetune.tasks import finetune_rows
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.family_tokenizers import build
from support.finetune_tab_helpers import form

pytestmark = pytest.mark.usefixtures("one_thread")
POSITIONS = 66                  # 64 usable: RoBERTa counts positions from pad_token_id + 1 = 2


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> Iterator[Services]:
    root = tmp_path_factory.mktemp("finetune-roberta")
    folder = build("roberta", root / "roberta")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config = transformers.RobertaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=48, max_position_embeddings=POSITIONS,
                                        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    transformers.RobertaModel(config).save_pretrained(folder)
    worker = TrainingWorker(root / "runs")
    registry = ModelRegistry(runs_root=root / "runs", worker=worker, default_dir=folder)
    try:
        yield Services(tokenizer=WordPieceTokenizer.from_file(folder), max_length=128, worker=worker, models=registry)
    finally:
        worker.close(timeout_s=30)


@pytest.mark.parametrize("task", list(finetune_rows()))
def test_every_rows_job_is_made_for_a_roberta(services: Services, task: str) -> None:
    job = make_job(services, *form(task, seq_length=64))
    assert job.spec.task == task and job.spec.validate().max_seq_length == 64


def test_the_sequence_length_is_the_positions_less_robertas_offset(services: Services) -> None:
    with pytest.raises(ValueError, match=r"Sequence length 65 is longer than the base model's 64 positions; "
                                         r"choose at most 64\."):
        make_job(services, *form("token_classification", seq_length=65))


def test_a_tagging_run_from_the_form_exports_robertas_own_layout(services: Services) -> None:
    job = make_job(services, *form("token_classification", steps=4, batch_size=4, seq_length=64, eval_fraction=0.1))
    worker = services.get_worker()
    worker.start(job.spec)
    assert worker.join(120), worker.status().message
    status = worker.status()
    assert status.state == "finished", status.message
    checkpoint = RunFolder(status.run_dir).checkpoints()[-1].path
    model, info = transformers.RobertaForTokenClassification.from_pretrained(checkpoint, output_loading_info=True)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert model.config.id2label == {i: tag for i, tag in enumerate(job.data.labels)}
    assert worker.eval_examples() is not None and worker.eval_examples().predictions
