"""engine.training.jobs.cli: flag names in messages, --init-from run directories, --resume as a job spec."""
from __future__ import annotations

import argparse
import json

import pytest

from engine.training.jobs import cli
from engine.training.loop.config import TrainingConfig
from engine.training.jobs.models import model_source
from engine.training.jobs.run_folder import RunFolder


def test_flag_names_replace_config_fields():
    assert cli.flag_names("learning_rate must be a positive finite number, got -1") == \
        "--lr must be a positive finite number, got -1"
    assert cli.flag_names("max_seq_length (1000) is longer than") == "--seq-len (1000) is longer than"
    assert cli.flag_names("something else") == "something else"


def _fake_checkpoint(run, step: int, config: TrainingConfig | None = None):
    folder = run / "checkpoints" / f"step-{step:06d}"
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "training_state.pt"):
        (folder / name).write_text("x")
    if config is not None:
        (folder / "explorer_state.json").write_text(json.dumps({"config": config.to_dict()}))
    return folder


def test_model_source_resolves_a_run_to_its_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    for step in (2, 5):
        _fake_checkpoint(run, step)
    assert model_source(str(run)) == str(run / "checkpoints" / "step-000005")
    assert model_source("default") == "default"
    assert model_source(str(run / "checkpoints" / "step-000002")) == str(run / "checkpoints" / "step-000002")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    parser.add_argument("--data")
    cli.add_training_arguments(parser, dict(seq_len=1, batch_size=2, lr=3, steps=4, eval_every=5, eval_batches=6,
                                            checkpoint_every=7, checkpoint_every_s=8.0))
    return parser


def test_resume_takes_the_run_spec_and_changes_only_resumable_flags(tmp_path, capsys):
    config = TrainingConfig(learning_rate=2e-5, batch_size=6, freeze_encoder=True, task="qa")
    _fake_checkpoint(tmp_path / "run", 3, config)
    RunFolder(tmp_path / "run").write_spec({"data": "squad.json", "task": "qa", "doc_stride": 64})
    parser = _parser()
    args = parser.parse_args(["--resume", str(tmp_path / "run"), "--steps", "9", "--lr", "2e-5",
                              "--checkpoint-every-s", "60"])
    spec = cli.resumed_spec(args, parser, {"data": "data"}, {})
    training = spec.training_config()
    assert (spec.data, spec.doc_stride, training.learning_rate, training.batch_size, training.freeze_encoder,
            training.total_steps, training.checkpoint_every_s) == ("squad.json", 64, 2e-5, 6, True, 9, 60.0)
    assert spec.run_dir == str(tmp_path / "run") and spec.resume_from == str(tmp_path / "run" / "checkpoints"
                                                                                / "step-000003")
    for argv, message in ((["--lr", "1", "--seq-len", "64"], "cannot change --lr, --seq-len when resuming"),
                          (["--data", "other.json"], "cannot change --data when resuming")):
        args = parser.parse_args(["--resume", str(tmp_path / "run"), *argv])
        with pytest.raises(SystemExit):
            cli.resumed_spec(args, parser, {"data": "data"}, {})
        err = capsys.readouterr().err
        assert message in err and "only --checkpoint-every, --checkpoint-every-s, --device" in err, err


def test_report_to_is_a_flag_of_both_commands_and_may_change_on_resume(tmp_path, capsys):
    from engine import finetune, pretrain

    parser = pretrain.build_parser()
    assert pretrain.spec_from_args(parser.parse_args(["--report-to", "tensorboard"]), parser).report_to == "tensorboard"
    assert pretrain.spec_from_args(parser.parse_args([]), parser).report_to is None          # none
    parser = finetune.build_parser()
    args = parser.parse_args(["--task", "classification", "--data", "assets/examples/sentiment.csv",
                              "--report-to", "none"])
    assert finetune.spec_from_args(args, parser).report_to == "none"
    with pytest.raises(SystemExit):
        parser.parse_args(["--report-to", "wandb"])
    assert "--report-to: invalid choice: 'wandb'" in capsys.readouterr().err
    _fake_checkpoint(tmp_path / "run", 3, TrainingConfig())
    RunFolder(tmp_path / "run").write_spec({"task": "pretraining", "report_to": "tensorboard"})
    parser = _parser()
    kept = cli.resumed_spec(parser.parse_args(["--resume", str(tmp_path / "run")]), parser, {}, {})
    changed = cli.resumed_spec(parser.parse_args(["--resume", str(tmp_path / "run"), "--report-to", "none"]),
                               parser, {}, {})
    assert (kept.report_to, changed.report_to) == ("tensorboard", "none")
