"""engine.training.jobs.cli and training_flags: flag names in messages, --init-from run directories, --resume as a
job spec, what a run prints (a handful of lines while preparing, the run folder's size and --keep-last at the end)."""
from __future__ import annotations

import argparse
import json
import re

import pytest

from engine.training.jobs import cli, training_flags
from engine.training.loop.config import TrainingConfig
from engine.training.jobs.models import model_source
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import write_spec


def test_flag_names_replace_config_fields():
    assert training_flags.flag_names("learning_rate must be a positive finite number, got -1") == \
        "--lr must be a positive finite number, got -1"
    assert training_flags.flag_names("max_seq_length (1000) is longer than") == "--seq-len (1000) is longer than"
    assert training_flags.flag_names("something else") == "something else"


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
    training_flags.add_training_arguments(parser, dict(seq_len=1, batch_size=2, lr=3, steps=4, eval_every=5,
                                                       eval_batches=6, checkpoint_every=7, checkpoint_every_s=8.0))
    return parser


def test_resume_takes_the_run_spec_and_changes_only_resumable_flags(tmp_path, capsys):
    config = TrainingConfig(learning_rate=2e-5, batch_size=6, freeze_encoder=True, task="qa")
    _fake_checkpoint(tmp_path / "run", 3, config)
    write_spec(RunFolder(tmp_path / "run"), {"data": "squad.json", "task": "qa", "doc_stride": 64})
    parser = _parser()
    args = parser.parse_args(["--resume", str(tmp_path / "run"), "--steps", "9", "--lr", "2e-5",
                              "--checkpoint-every-s", "60"])
    spec = training_flags.resumed_spec(args, parser, {"data": "data"}, {})
    training = spec.training_config()
    assert (spec.data, spec.settings.doc_stride, training.learning_rate, training.batch_size, training.freeze_encoder,
            training.total_steps, training.checkpoint_every_s) == ("squad.json", 64, 2e-5, 6, True, 9, 60.0)
    assert spec.run_dir == str(tmp_path / "run") and spec.resume_from == str(tmp_path / "run" / "checkpoints"
                                                                                / "step-000003")
    for argv, message in ((["--lr", "1", "--seq-len", "64"], "cannot change --lr, --seq-len when resuming"),
                          (["--data", "other.json"], "cannot change --data when resuming")):
        args = parser.parse_args(["--resume", str(tmp_path / "run"), *argv])
        with pytest.raises(SystemExit):
            training_flags.resumed_spec(args, parser, {"data": "data"}, {})
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
    write_spec(RunFolder(tmp_path / "run"), {"task": "pretraining", "report_to": "tensorboard"})
    parser = _parser()
    kept = training_flags.resumed_spec(parser.parse_args(["--resume", str(tmp_path / "run")]), parser, {}, {})
    changed = training_flags.resumed_spec(
        parser.parse_args(["--resume", str(tmp_path / "run"), "--report-to", "none"]), parser, {}, {})
    assert (kept.report_to, changed.report_to) == ("tensorboard", "none")


@pytest.fixture
def threads_back():
    """The in-process run passes --threads 1; give the other tests their thread count back."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _size(text: str) -> float:
    """Bytes of "262 MB" / "4.5 MB" / "12 kB"."""
    number, unit = text.split()
    return float(number.replace(",", "")) * {"MB": 1e6, "kB": 1e3}[unit]


def test_pretrain_prints_a_handful_of_lines_and_the_run_folders_size(tmp_path, monkeypatch, capsys, threads_back):
    """A fresh token cache: counting, the vocabulary and tokenising each print their line and one reading
    bar (tqdm redraws a bar with carriage returns, in place); at the end the folder's size and --keep-last."""
    from engine import pretrain

    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    code = pretrain.main(["--preset", "tiny", "--max-documents", "40", "--seq-len", "32", "--vocab-size", "300",
                          "--steps", "1", "--eval-every", "0", "--threads", "1", "--run-dir", str(run)])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = err.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(f"run {run}: tiny"))
    preparing = lines[:start]
    assert len(preparing) <= 8, preparing
    stages = ["counting the corpus's documents", "training a WordPiece vocabulary of 300 tokens",
              "tokenising shakespeare"]
    at = [[i for i, line in enumerate(preparing) if line.startswith(stage)] for stage in stages]
    assert all(len(found) == 1 for found in at), preparing          # each stage's line starts a line, once
    assert at == sorted(at) and at[2][0] - at[1][0] <= 2, preparing  # the vocabulary: its line and one bar

    files = [path for path in run.rglob("*") if path.is_file()]
    total = sum(path.stat().st_size for path in files)
    state = sum(path.stat().st_size for path in files if path.name == "training_state.pt")
    found = re.search(rf"^run folder {re.escape(str(run))}: (.+) on disk, (.+) of it optimizer state "
                      r"\(training_state\.pt in 1 checkpoint\(s\)\)$", err, re.M)
    assert found, err[-2000:]
    assert abs(_size(found.group(1)) - total) <= 0.05e6 and abs(_size(found.group(2)) - state) <= 0.05e6
    assert lines[-2] == ("--keep-last N keeps only the newest N checkpoints; a checkpoint's optimizer state "
                         "(training_state.pt) is only needed to resume")


def test_the_disk_note_says_what_keep_last_kept(tmp_path):
    step = tmp_path / "run" / "checkpoints" / "step-000004"
    step.mkdir(parents=True)
    for name, size in (("training_state.pt", 2_000_000), ("model.safetensors", 1_000_000), ("config.json", 0)):
        (step / name).write_bytes(b"\0" * size)
    (tmp_path / "run" / "metrics.jsonl").write_bytes(b"\0" * 500_000)
    note = cli.disk_note(tmp_path / "run", keep_last=1).splitlines()
    assert note == [f"run folder {tmp_path / 'run'}: 3.5 MB on disk, 2.0 MB of it optimizer state "
                    "(training_state.pt in 1 checkpoint(s))",
                    "--keep-last 1 kept only the newest 1 checkpoint(s); a checkpoint's optimizer state "
                    "(training_state.pt) is only needed to resume"]
    assert [cli.megabytes(n) for n in (999, 999_499, 999_500, 9_949_999, 262_400_000)] == \
        ["1 kB", "999 kB", "1.0 MB", "9.9 MB", "262 MB"]


def test_keep_optimizer_state_is_a_flag_of_both_commands_and_may_change_on_resume(tmp_path, capsys):
    """Both --help list it with its three values; pretraining keeps "newest" (continue with more steps), a
    fine-tune ends lean ("while-running"), and the flag wins over either."""
    from engine import finetune, pretrain

    parser = pretrain.build_parser()
    assert pretrain.spec_from_args(parser.parse_args([]), parser).training_config().keep_optimizer_state == "newest"
    args = parser.parse_args(["--keep-optimizer-state", "all"])
    assert pretrain.spec_from_args(args, parser).training_config().keep_optimizer_state == "all"
    for command in (pretrain, finetune):
        shown = " ".join(command.build_parser().format_help().split())
        assert "--keep-optimizer-state {newest,while-running,all}" in shown
        assert "newest (pretraining's default)" in shown and "tuning's default): the same until the run finishes, " \
            "then its last checkpoint keeps only the model (a finished run cannot continue" in shown
    parser = finetune.build_parser()
    sentiment = ["--task", "classification", "--data", "assets/examples/sentiment.csv"]
    args = parser.parse_args(sentiment)
    assert finetune.spec_from_args(args, parser).training_config().keep_optimizer_state == "while-running"
    args = parser.parse_args([*sentiment, "--keep-optimizer-state", "all"])
    assert finetune.spec_from_args(args, parser).training_config().keep_optimizer_state == "all"
    with pytest.raises(SystemExit):
        parser.parse_args(["--keep-optimizer-state", "some"])
    assert "--keep-optimizer-state: invalid choice: 'some'" in capsys.readouterr().err
    _fake_checkpoint(tmp_path / "run", 3, TrainingConfig())
    write_spec(RunFolder(tmp_path / "run"), {"task": "pretraining"})
    parser = _parser()
    spec = training_flags.resumed_spec(
        parser.parse_args(["--resume", str(tmp_path / "run"), "--keep-optimizer-state", "all"]), parser, {}, {})
    assert spec.training_config().keep_optimizer_state == "all"


def test_a_new_run_folder_is_named_by_its_task_and_time():
    from engine.training.jobs.setup import default_run_dir

    assert re.fullmatch(r"runs/classification-\d{8}-\d{6}", default_run_dir("classification").replace("\\", "/"))


def _fine_tune(tmp_path, tokenizer, run, *flags: str) -> int:
    """A 6-step classification fine-tune of a tiny model (saved once under ``tmp_path/model``) into ``run``."""
    from engine import finetune
    from support.finetune_helpers import classification_rows, save_tiny_model, write_csv

    model = tmp_path / "model"
    if not model.is_dir():
        save_tiny_model(model, tokenizer)
        write_csv(tmp_path / "classes.csv", classification_rows(16))
    return finetune.main(["--task", "classification", "--data", str(tmp_path / "classes.csv"), "--init-from",
                          str(model), "--steps", "6", "--batch-size", "4", "--eval-every", "0", "--run-dir", str(run),
                          "--threads", "1", "--no-progress", *flags])


def test_a_small_fine_tune_keeps_optimizer_state_in_its_newest_checkpoint_only_while_it_runs(
        tmp_path, capsys, threads_back, tiny_tokenizer):
    """Three checkpoints: "newest" drops the older two's optimizer state and the run folder shrinks by it; the
    default ("while-running") drops the last one's too once the run finishes; "all" keeps every one."""
    sizes = {}
    for keep in ("while-running", "newest", "all"):
        run = tmp_path / keep
        flags = ["--checkpoint-every", "2"] + ([] if keep == "while-running" else ["--keep-optimizer-state", keep])
        code = _fine_tune(tmp_path, tiny_tokenizer, run, *flags)
        assert code == 0, capsys.readouterr().err[-2000:]
        states = {c.step: (c.path / "training_state.pt").stat().st_size for c in RunFolder(run).checkpoints()}
        assert list(states) == [6, 4, 2]
        sizes[keep] = (states, sum(p.stat().st_size for p in run.rglob("*") if p.is_file()))
    (ended, ended_total), (lean, lean_total), (full, full_total) = sizes["while-running"], sizes["newest"], sizes["all"]
    assert lean[6] == full[6] and lean[2] * 4 < full[2] and lean[4] * 4 < full[4]
    assert full_total - lean_total > 0.99 * ((full[2] - lean[2]) + (full[4] - lean[4]))   # the rest: same files
    assert ended[2] == lean[2] and ended[6] * 4 < full[6]
    assert lean_total - ended_total > 0.99 * (full[6] - ended[6])


def test_a_finished_fine_tune_keeps_only_the_model_and_resuming_it_says_how_to_go_on(tmp_path, capsys, threads_back,
                                                                                     tiny_tokenizer):
    """The Fine-tune tab's way (a checkpoint at the last step only), with the command line's defaults: the run
    folder holds no optimizer state and is at most 2.5x the start model's weights; --resume is refused with the
    sentence, which names the checkpoint to start a new fine-tune from; --init-from that checkpoint works."""
    from engine import finetune
    from engine.training.runs.state import finished_lean_refusal, has_optimizer_state, read_training_state

    run = tmp_path / "finished"
    code = _fine_tune(tmp_path, tiny_tokenizer, run, "--checkpoint-every", "0")
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    assert "(the last keeps only the model, --keep-optimizer-state while-running: to train further, start a new run " \
           "from it with --init-from)" in err
    [last] = RunFolder(run).checkpoints()
    assert not has_optimizer_state(read_training_state(last.path))
    folder = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    weights = (tmp_path / "model" / "model.safetensors").stat().st_size
    assert folder <= 2.5 * weights, (folder, weights)

    assert finetune.main(["--resume", str(run), "--steps", "8", "--threads", "1", "--no-progress"]) == 2
    sentence = finished_lean_refusal("finished", "step-000006")
    assert capsys.readouterr().err.strip().endswith(f"error: {sentence}")
    code = finetune.main(["--task", "classification", "--data", str(tmp_path / "classes.csv"), "--init-from",
                          str(last.path), "--steps", "2", "--batch-size", "4", "--eval-every", "0", "--run-dir",
                          str(tmp_path / "again"), "--threads", "1", "--no-progress"])
    assert code == 0 and [c.step for c in RunFolder(tmp_path / "again").checkpoints()] == [2]
