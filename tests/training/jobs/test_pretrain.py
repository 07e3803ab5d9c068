"""``python -m engine.pretrain``: end to end, resume, bad arguments, and 2-process DDP (gloo, CPU)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from support.cli_helpers import run_cli, torchrun
from engine.checkpoints.hf_format import load
from engine.pretrain import main
from engine.training.runs.state import read_metrics

# Tiny and exact: dropout 0 and a schedule that does not depend on --steps, so a 3-step run
# equals the first 3 steps of a 6-step run; batch 4 x 2 accumulated = the DDP run's 2 x 4.
TINY = ["--preset", "tiny", "--max-documents", "40", "--seq-len", "32", "--vocab-size", "300", "--dropout", "0",
        "--schedule", "inverse_sqrt", "--warmup", "0", "--lr", "1e-3", "--eval-batches", "2", "--threads", "1",
        "--no-progress"]


@pytest.fixture(autouse=True)
def keep_threads():
    """In-process runs pass --threads 1; give the other tests their thread count back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> Path:
    """6 steps in one process (batch 4, 2 micro-batches per step), checkpoints at 3 and 6."""
    run_dir = tmp_path_factory.mktemp("single") / "run"
    result = run_cli([*TINY, "--batch-size", "4", "--grad-accum", "2", "--steps", "6", "--checkpoint-every", "3",
                      "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_cli_end_to_end_writes_metrics_and_loadable_checkpoints(single_run):
    records = read_metrics(single_run / "metrics.jsonl")
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    assert all(r["mlm_loss"] > 0 and r["nsp_loss"] > 0 and r["tokens_per_s"] > 0 for r in train)
    assert [r["step"] for r in records if r["kind"] == "eval"] == [6]
    assert sorted(p.name for p in (single_run / "checkpoints").iterdir()) == ["step-000003", "step-000006"]
    for name in ("step-000003", "step-000006"):
        loaded = load(single_run / "checkpoints" / name)
        assert set(loaded.heads) == {"mlm", "nsp"} and loaded.tokenizer.vocab_size == 300
        assert loaded.config.hidden_size == 128 and loaded.config.hidden_dropout_prob == 0.0
    assert json.loads((single_run / "run.json").read_text())["max_documents"] == 40


def test_cli_resume_continues_from_the_last_checkpoint(single_run, tmp_path):
    import shutil
    run_dir = tmp_path / "resumed"
    shutil.copytree(single_run, run_dir)
    result = run_cli(["--resume", str(run_dir), "--steps", "8", "--threads", "1", "--no-progress"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming" in result.stderr and "step-000006" in result.stderr
    steps = [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert steps == [1, 2, 3, 4, 5, 6, 7, 8]
    assert (run_dir / "checkpoints" / "step-000008").is_dir()
    assert load(run_dir / "checkpoints" / "step-000008").config.hidden_size == 128


def test_stop_at_trains_in_chunks_that_add_up_to_one_run(single_run, tmp_path):
    run_dir = tmp_path / "chunked"
    same_vocabulary = ["--tokenizer", str(single_run / "checkpoints" / "step-000003")]  # (training one is not
    args = [*TINY, *same_vocabulary, "--batch-size", "4", "--grad-accum", "2", "--steps", "6",  # deterministic)
            "--checkpoint-every", "3"]
    assert main([*args, "--run-dir", str(run_dir), "--stop-at", "2"]) == 0
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-000002"]
    assert main(["--resume", str(run_dir), "--threads", "1", "--no-progress"]) == 0
    chunked = load(run_dir / "checkpoints" / "step-000006").model.state_dict()
    whole = load(single_run / "checkpoints" / "step-000006").model.state_dict()
    assert all(torch.allclose(chunked[k], whole[k], atol=1e-6) for k in whole)


def test_resume_refuses_to_change_what_defines_the_run(single_run, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--resume", str(single_run), "--steps", "9", "--lr", "0.1", "--seq-len", "64"])
    assert exit_info.value.code == 2
    assert "cannot change --lr, --seq-len when resuming" in capsys.readouterr().err


def test_bad_lr_exits_2_with_message():
    result = run_cli(["--lr", "-1"])
    assert result.returncode == 2
    assert "--lr must be a positive finite number" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "--batch-size must be an integer >= 1"),
    (["--seq-len", "1000"], "--seq-len (1000) is longer than the model's 512 positions (max_position_embeddings 512)"),
    (["--steps", "10", "--warmup", "20"], "--warmup (20) is more than total_steps"),
    (["--mlm-probability", "1.5"], "--mlm-probability must be a number in"),
    (["--preset", "huge"], "invalid choice: 'huge'"),
    (["--corpus", "/no/such/file.txt"], "no built-in corpus or file"),
    (["--dropout", "1"], "--dropout must be in [0, 1)"),
    (["--resume", "/no/such/run"], "--resume: no run or checkpoint directory"),
])
def test_bad_arguments_exit_2_with_message(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_torchrun_two_gloo_processes_hold_identical_weights(single_run, tmp_path):
    """2 processes x batch 4 = the single run's global batch 8: same weights on both ranks, and
    (dropout 0, the same data) the same as the single process after 3 steps up to rounding."""
    run_dir = tmp_path / "ddp"
    # WordPiece training is not bit-reproducible across processes: reuse the single run's vocabulary
    tokenizer = single_run / "checkpoints" / "step-000003"
    args = [*TINY, "--batch-size", "4", "--steps", "3", "--run-dir", str(run_dir), "--debug-dump-weights",
            "--report-to", "tensorboard"]
    args[args.index("--vocab-size"):args.index("--vocab-size") + 2] = ["--tokenizer", str(tokenizer)]
    result = torchrun("engine.pretrain", args)
    assert result.returncode == 0, result.stderr[-3000:]
    rank0 = torch.load(run_dir / "weights-rank0.pt", weights_only=True)
    rank1 = torch.load(run_dir / "weights-rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    # only rank 0 logged: one record per step, and one checkpoint
    steps = [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert steps == [1, 2, 3]
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["step-000003"]
    [events] = (run_dir / "logs").iterdir()                       # and only rank 0 wrote TensorBoard events
    reader = EventAccumulator(str(events))
    reader.Reload()
    assert [e.step for e in reader.Scalars("train/loss")] == [1, 2, 3]
    # the same optimizer steps as one process with 2 accumulated micro-batches
    single = load(single_run / "checkpoints" / "step-000003").model.state_dict()
    ddp = load(run_dir / "checkpoints" / "step-000003").model.state_dict()
    for key in single:
        assert torch.equal(ddp[key], rank0[key]), key
        torch.testing.assert_close(ddp[key], single[key], rtol=1e-4, atol=1e-5, msg=key)
    ddp_loss = [r["mlm_loss"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    single_loss = [r["mlm_loss"] for r in read_metrics(single_run / "metrics.jsonl") if r["kind"] == "train"][:3]
    assert ddp_loss == pytest.approx(single_loss, rel=1e-5)


def test_init_from_an_encoder_only_model_adds_fresh_heads(single_run, tmp_path, capsys):
    """--init-from: the encoder's weights are the source's, the MLM/NSP heads start fresh."""
    from engine.checkpoints.hf_format import save
    from engine.model.heads import BertWithHeads

    source = load(single_run / "checkpoints" / "step-000006")
    encoder = BertWithHeads(source.config, heads=())       # a plain BertModel (with its pooler)
    encoder.bert.load_state_dict(source.model.bert.state_dict())
    save(encoder, source.tokenizer, tmp_path / "encoder")
    run_dir = tmp_path / "run"
    code = main([*TINY, "--init-from", str(tmp_path / "encoder"), "--lr", "1e-12", "--batch-size", "4",
                 "--steps", "1", "--run-dir", str(run_dir)])
    assert code == 0, capsys.readouterr().err[-2000:]
    trained = load(run_dir / "checkpoints" / "step-000001")
    assert set(trained.heads) == {"mlm", "nsp"} and trained.tokenizer.vocab_size == 300
    before, after = encoder.state_dict(), trained.model.state_dict()
    for key in before:
        torch.testing.assert_close(after[key], before[key], rtol=0, atol=1e-9, msg=key)
