"""engine.training.cli: flag names in messages, --init-from run directories, resume defaults."""
from __future__ import annotations

import argparse
import json

import pytest

from engine.training import cli
from engine.training.config import TrainingConfig


def test_flag_names_replace_config_fields():
    assert cli.flag_names("learning_rate must be a positive finite number, got -1") == \
        "--lr must be a positive finite number, got -1"
    assert cli.flag_names("max_seq_length (1000) is longer than") == "--seq-len (1000) is longer than"
    assert cli.flag_names("something else") == "something else"


def test_model_source_resolves_a_run_to_its_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    for step in (2, 5):
        folder = run / "checkpoints" / f"step-00000{step}"
        folder.mkdir(parents=True)
        for name in ("config.json", "model.safetensors", "training_state.pt"):
            (folder / name).write_text("x")
    assert cli.model_source(str(run)) == str(run / "checkpoints" / "step-000005")
    assert cli.model_source("default") == "default"
    assert cli.model_source(str(run / "checkpoints" / "step-000002")) == str(run / "checkpoints" / "step-000002")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    parser.add_argument("--data")
    cli.add_training_arguments(parser, dict(seq_len=1, batch_size=2, lr=3, steps=4, eval_every=5, eval_batches=6,
                                            checkpoint_every=7))
    return parser


def test_resume_fills_unset_arguments_from_the_run(tmp_path, capsys):
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000003"
    checkpoint.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "training_state.pt"):
        (checkpoint / name).write_text("x")
    config = TrainingConfig(learning_rate=2e-5, batch_size=6, freeze_encoder=True, task="qa")
    (checkpoint / "trainer_state.json").write_text(json.dumps({"config": config.to_dict()}))
    cli.write_run_file(tmp_path / "run", {"data": "squad.json"})
    parser = _parser()
    args = parser.parse_args(["--resume", str(tmp_path / "run"), "--steps", "9"])
    cli.apply_resume(args, parser, fixed=("data", "lr"))
    assert (args.data, args.lr, args.batch_size, args.freeze_encoder, args.steps) == ("squad.json", 2e-5, 6, True, 9)
    assert args.run_dir == str(tmp_path / "run")
    args = parser.parse_args(["--resume", str(tmp_path / "run"), "--lr", "1"])
    with pytest.raises(SystemExit):
        cli.apply_resume(args, parser, fixed=("data", "lr"))
    assert "cannot change --lr when resuming" in capsys.readouterr().err
