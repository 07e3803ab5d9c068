"""A task owns its settings: the loop's task object holds them and its loss reads them; a builder is reused by
the target layout it makes; the built-in tasks' settings (QA's windows, multiple choice's choices, ``qa_mlm``'s
text) are settings like any task's; runs written before (their task fields flat in ``run.json``) still resume.
The toy task (``support.toy_task``: label smoothing over the classification builder) is one module and one
``registered`` line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.data.features import FeatureDataset
from engine.data.multiple_choice import ChoiceDataset
from engine.finetune import build_parser, main as finetune_main
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.runs.legacy import FLAT_TASK_FIELDS
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import read_spec, write_spec
from engine.training.tasks import task_for
from engine.training.tasks.finetuning import QASettings
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.registry import TRAINING_TASKS, registered
from support.finetune_helpers import classification_rows, save_tiny_model, write_csv, write_squad
from support.toy_task import SMOOTHED, SmoothedClassificationTask, SmoothingSettings

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("task-settings")
    return {"model": save_tiny_model(root / "model", tiny_tokenizer),
            "csv": write_csv(root / "classes.csv", classification_rows(16)),
            "squad": write_squad(root / "squad.json", num_contexts=4)}


def toy_config(**overrides) -> TrainingConfig:
    values = dict(task=SMOOTHED.name, learning_rate=1e-3, warmup_steps=0, total_steps=2, batch_size=8,
                  max_seq_length=32, eval_every=0, eval_batches=0, checkpoint_every=0, nsp=False)
    return TrainingConfig(**{**values, **overrides})


def test_the_task_object_holds_its_settings_and_its_loss_reads_them(files, tmp_path):
    with registered(SMOOTHED):
        task = task_for(toy_config(), {"label_smoothing": 0.3})
        assert isinstance(task, SmoothedClassificationTask) and task.settings == SmoothingSettings(0.3)
        assert task_for(toy_config()).settings == SmoothingSettings(0.0)          # the dataclass default
        job = prepare_job(JobSpec(toy_config(), init_from=str(files["model"]), data=str(files["csv"]),
                                  eval_fraction=0.25, run_dir=str(tmp_path / "run"),
                                  task_settings={"label_smoothing": 0.3}))
    trainer = job.trainer
    assert trainer.task.settings.label_smoothing == 0.3
    assert isinstance(trainer.train_data, FeatureDataset) and trainer.train_data.layout == "label"   # reused builder
    batch = trainer.train_data.batch(0, 0)
    trainer.model.eval()
    with torch.no_grad():
        out = trainer.task.forward(trainer.model, batch, trainer.config)
        logits = out.logits.float()                                                      # (B, L)
    for smoothing in (0.0, 0.3):          # the reference: torch's smoothed cross-entropy, by hand
        n = logits.shape[-1]
        target = torch.full_like(logits, smoothing / n).scatter_(1, batch.class_labels[:, None],
                                                                  1 - smoothing + smoothing / n)
        by_hand = -(target * logits.log_softmax(-1)).sum(-1).mean()
        assert F.cross_entropy(logits, batch.class_labels, label_smoothing=smoothing) == pytest.approx(
            float(by_hand), rel=1e-5)
    assert float(out.loss) == pytest.approx(float(F.cross_entropy(logits, batch.class_labels, label_smoothing=0.3)),
                                            rel=1e-5)
    assert abs(float(out.loss) - float(F.cross_entropy(logits, batch.class_labels))) > 1e-4    # the setting counts
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["task"] == SMOOTHED.name and record["task_settings"] == {"label_smoothing": 0.3}


def test_the_toy_setting_is_a_flag_and_trains_from_the_command_line(files, tmp_path, capsys):
    assert "--label-smoothing" not in build_parser().format_help()
    with registered(SMOOTHED):
        text = " ".join(build_parser().format_help().split())
        assert f"{SMOOTHED.name} settings:" in text and "--label-smoothing LABEL_SMOOTHING" in text
        assert "share of each target spread evenly over every label, 0 to under 1 (default 0.0)" in text
        code = finetune_main(["--task", SMOOTHED.name, "--data", str(files["csv"]), "--init-from", str(files["model"]),
                              "--label-smoothing", "0.2", "--steps", "2", "--eval-every", "0", "--checkpoint-every",
                              "0", "--threads", "1", "--no-progress", "--run-dir", str(tmp_path / "cli")])
        assert code == 0, capsys.readouterr().err
        assert "step 2/2 toy_loss=" in capsys.readouterr().err
        assert json.loads((tmp_path / "cli" / "run.json").read_text())["task_settings"] == {"label_smoothing": 0.2}
        with pytest.raises(SystemExit) as exited:
            finetune_main(["--task", SMOOTHED.name, "--data", str(files["csv"]), "--label-smoothing", "1.5"])
        assert exited.value.code == 2 and "--label-smoothing must be in [0, 1), got 1.5" in capsys.readouterr().err
    assert SMOOTHED.name not in TRAINING_TASKS


def test_built_in_task_fields_are_settings_not_job_fields():
    fields = set(JobSpec.__dataclass_fields__)
    assert not fields & set(FLAT_TASK_FIELDS)
    owners = {name: d.settings for name, d in TRAINING_TASKS.items()}
    assert {"doc_stride", "max_question_len"} <= set(owners["qa"].__dataclass_fields__)
    assert set(owners["qa_mlm"].__dataclass_fields__) >= {"doc_stride", "mlm_corpus", "mlm_seq_len", "mlm_batch_size"}
    assert set(owners["multiple_choice"].__dataclass_fields__) == {"num_choices"}
    with pytest.raises(ValueError, match="doc_stride must be a whole number >= 0, got -1"):
        QASettings(doc_stride=-1)


def test_a_record_with_flat_task_fields_reads_them_as_settings():
    flat = {"task": "qa", "data": "squad.json", "doc_stride": 32, "max_question_len": 16, "num_choices": 4,
            "mlm_corpus": None, "mlm_seq_len": None, "mlm_batch_size": None}
    spec = JobSpec.from_record(flat, TrainingConfig(task="qa"))
    assert spec.task_settings == {"doc_stride": 32, "max_question_len": 16}         # its task's; the others dropped
    choice = JobSpec.from_record({**flat, "task": "multiple_choice", "num_choices": 3},
                                 TrainingConfig(task="multiple_choice"))
    assert choice.task_settings == {"num_choices": 3}
    assert JobSpec.from_record({**flat, "task": "classification"},
                               TrainingConfig(task="classification")).task_settings == {}


def test_a_run_written_with_flat_task_fields_resumes_exactly(files, tmp_path):
    config = TrainingConfig(task="qa", learning_rate=1e-3, warmup_steps=0, total_steps=2, batch_size=4,
                            max_seq_length=64, eval_every=0, eval_batches=0, checkpoint_every=0, nsp=False)
    run = tmp_path / "qa"
    first = prepare_job(JobSpec(config, init_from=str(files["model"]), data=str(files["squad"]), eval_fraction=0.0,
                                run_dir=str(run), task_settings={"doc_stride": 16, "max_question_len": 16})).trainer
    first.train()
    folder = RunFolder(run)
    record = read_spec(folder)
    settings = record.pop("task_settings")             # as the version before task settings wrote it
    write_spec(folder, {**record, **settings, "num_choices": 4, "mlm_corpus": None, "mlm_seq_len": None,
                        "mlm_batch_size": None})
    resumed = prepare_job(JobSpec({"total_steps": 3}, resume_from=str(run))).trainer
    assert resumed.global_step == 2 and resumed.task.settings == QASettings(16, 16)
    assert resumed.train_data.fingerprint() == first.train_data.fingerprint()
    assert resumed.train().status == "finished" and resumed.global_step == 3


def test_fingerprints_are_those_runs_of_the_previous_layout_keys_recorded():
    """Datasets were keyed by task name; a run written then resumes only if its data hashes the same now. These
    are the fingerprints the version before target layouts gave the same data."""
    rows = [np.arange(2, 2 + n) for n in (3, 5, 4)]
    expected = {"span": "a25855217166042ba5bfc590d803a090c50c26ee9b78c21c0d197cfdd6a6ecc6",
                "label": "1d31fae692c2c0cf80cd5fa83847cdd32e4ee3500a77dbcc0349285a195203c1",
                "tags": "600ae062e4cf5237f2d279958e88aa2556bc3bd2f84d6e8019310d8dc3e42d88"}
    for layout, fingerprint in expected.items():
        width = 8 if layout == "tags" else (2 if layout == "span" else 1)
        targets = np.arange(3 * width).reshape(3, width) % 3
        assert FeatureDataset(layout, rows, [1, 2, 3], targets, 8, 2, seed=5).fingerprint() == fingerprint
    choices = ChoiceDataset([[np.arange(2, 5), np.arange(3, 7)], [np.arange(2, 4), np.arange(5, 9)]],
                            [[1, 2], [1, 3]], [0, 1], 8, 2)
    assert choices.fingerprint() == "72d040e2c11c8e674013af35de31333db9123e88f38ab3deaef23b84473bf4a6"
