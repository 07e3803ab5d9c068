"""Checkpoints by time as well as steps: the policy's answers, a trainer driven by a fake clock (saves after
N seconds of training without a step interval, and a resume from such a checkpoint is bit for bit), rank 0
deciding for every DDP process, and a fine-tune killed mid-run continued from its time checkpoint."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.finetune import main as finetune_main
from engine.model.heads import BertWithHeads
from engine.training.runs.run_folder import RunFolder
from engine.training.loop.callbacks import TrainerCallback
from engine.training.loop.checkpoint_policy import CheckpointPolicy
from engine.training.loop.config import TrainingConfig
from engine.training.runs.state import read_metrics, read_training_state
from engine.training.tasks import task_for
from engine.training.loop.resume import resume
from engine.training.loop.trainer import Trainer
from engine.training.tasks.pretraining import build_datasets
from support.app_helpers import free_port
from support.cli_helpers import ROOT, run_cli
from support.finetune_helpers import classification_rows, save_tiny_model, write_csv
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")

SECONDS_PER_BATCH = 4.0


class FakeClock(TrainerCallback):
    """The trainer's clock: it moves ``SECONDS_PER_BATCH`` each time a micro-batch is read (inside a step)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def on_batch(self, trainer: Trainer, batch: object) -> None:
        self.now += SECONDS_PER_BATCH


def documents(n_docs: int = 12) -> list[list[str]]:
    words = sorted(WORDS)
    return [[" ".join(words[(d * 7 + s * 5 + j) % len(words)] for j in range(6)) + "." for s in range(6)]
            for d in range(n_docs)]


def timed_config(**overrides) -> TrainingConfig:
    values = dict(learning_rate=2e-3, warmup_steps=2, total_steps=10, batch_size=8, max_seq_length=32,
                  eval_every=0, checkpoint_every=0, checkpoint_every_s=10.0, seed=0)
    return TrainingConfig(**{**values, **overrides})


def datasets(tokenizer, cfg: TrainingConfig):
    docs = documents()
    return build_datasets(docs[:-3], docs[-3:], tokenizer, cfg)


class Saves(TrainerCallback):
    """The steps at which the trainer wrote a checkpoint (kept or not)."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_save(self, trainer: Trainer, path: Path) -> None:
        self.steps.append(trainer.global_step)


def clocked(trainer: Trainer) -> Trainer:
    clock = FakeClock()
    trainer.clock = clock
    trainer.add_callback(clock)
    trainer.saves = Saves()
    trainer.add_callback(trainer.saves)
    return trainer


def steps_saved(run_dir: Path) -> list[int]:
    return sorted(c.step for c in RunFolder(run_dir).checkpoints())


def test_policy_saves_by_steps_and_by_training_time() -> None:
    by_time = CheckpointPolicy(every_steps=0, every_s=10.0)
    assert [by_time.due(step, elapsed) for step, elapsed in [(1, 4.0), (2, 9.99), (3, 10.0)]] == [False, False, True]
    by_time.saved(10.0)
    assert not by_time.due(4, 19.5) and by_time.due(5, 20.0)
    both = CheckpointPolicy(every_steps=5, every_s=100.0)
    assert [s for s in range(1, 16) if both.due(s, elapsed=float(s))] == [5, 10, 15]
    assert both.due(7, elapsed=100.0)
    for off in (0, 0.0, None):
        assert not CheckpointPolicy(every_steps=0, every_s=off).due(3, elapsed=1e9)


@pytest.mark.parametrize("value", [-1, float("inf"), float("nan"), "300", True])
def test_config_refuses_a_bad_interval(value) -> None:
    with pytest.raises(ValueError, match="checkpoint_every_s must be a number of seconds >= 0"):
        timed_config(checkpoint_every_s=value)


def test_config_keeps_the_interval_and_older_configs_get_the_default() -> None:
    assert TrainingConfig().checkpoint_every_s == 300.0
    assert TrainingConfig.from_dict(timed_config(checkpoint_every_s=None).to_dict()).checkpoint_every_s is None
    older = {k: v for k, v in timed_config().to_dict().items() if k != "checkpoint_every_s"}
    assert TrainingConfig.from_dict(older).checkpoint_every_s == 300.0


def test_time_checkpoints_without_a_step_interval_and_an_exact_resume(tmp_path, tiny_tokenizer, make_config):
    cfg = timed_config()
    train, held_out = datasets(tiny_tokenizer, cfg)
    torch.manual_seed(0)
    first = clocked(Trainer(BertWithHeads(make_config()), tiny_tokenizer, train, held_out, cfg, tmp_path / "first",
                            task=task_for(cfg)))
    assert first.train(num_steps=3).status == "num_steps"
    assert steps_saved(first.run_dir) == [3]      # 4 s a step: 12 s of training at step 3 is the first past 10 s
    assert read_training_state(first.run_dir / "checkpoints" / "step-000003")["elapsed"] == 12.0
    shutil.copytree(first.run_dir, tmp_path / "at-step-3")
    assert first.train().status == "finished"
    assert first.saves.steps == [3, 6, 9, 10]     # then every 3 steps; 10 is the last
    assert steps_saved(first.run_dir) == [10]     # each checkpoint saved for time alone was replaced by the next
    records = [r for r in read_metrics(first.run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["elapsed"] for r in records] == [4.0 * s for s in range(1, 11)]

    train, held_out = datasets(tiny_tokenizer, cfg)
    resumed = clocked(resume(tmp_path / "at-step-3" / "checkpoints" / "step-000003", task_for(cfg), train, held_out,
                             run_dir=tmp_path / "resumed"))
    assert resumed.global_step == 3 and resumed.elapsed == 12.0
    assert resumed.train().status == "finished"
    assert resumed.saves.steps == [6, 9, 10]      # the timer went on from the checkpoint's 12 s
    ours = load_directory(resumed.run_dir / "checkpoints" / "step-000010").model.state_dict()
    theirs = load_directory(first.run_dir / "checkpoints" / "step-000010").model.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_off_means_steps_only_and_saving_changes_no_number(tmp_path, tiny_tokenizer, make_config):
    weights, saves = {}, {}
    for name, every_s, every in (("timed", 10.0, 0), ("steps", 0, 4)):
        cfg = timed_config(checkpoint_every_s=every_s, checkpoint_every=every)
        train, held_out = datasets(tiny_tokenizer, cfg)
        torch.manual_seed(0)
        trainer = clocked(Trainer(BertWithHeads(make_config()), tiny_tokenizer, train, held_out, cfg, tmp_path / name,
                                  task=task_for(cfg)))
        trainer.train()
        weights[name] = trainer.model.state_dict()
        saves[name] = trainer.saves.steps
    assert saves == {"timed": [3, 6, 9, 10], "steps": [4, 8, 10]}
    assert steps_saved(tmp_path / "steps") == [4, 8, 10] and steps_saved(tmp_path / "timed") == [10]
    assert all(torch.equal(weights["timed"][k], weights["steps"][k]) for k in weights["steps"])


DDP_SCRIPT = """
import sys
import torch.distributed as dist
from engine.training.loop.checkpoint_policy import CheckpointPolicy
dist.init_process_group("gloo")
rank = dist.get_rank()
policy = CheckpointPolicy(every_steps=0, every_s=10.0)
answers = [policy.due(1, elapsed=(15.0 if rank == 0 else 5.0)), policy.due(2, elapsed=(5.0 if rank == 0 else 15.0))]
open(sys.argv[1] + f"/rank{rank}.txt", "w").write(repr(answers))
dist.destroy_process_group()
"""


def test_under_ddp_rank_0_decides_for_every_process(tmp_path):
    script = tmp_path / "decide.py"
    script.write_text(DDP_SCRIPT)
    launcher = ["-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}", str(script)]
    result = run_cli([str(tmp_path)], module=launcher)
    assert result.returncode == 0, result.stderr[-3000:]
    # rank 0's clock is past the interval, rank 1's is not: both save; then the other way round: neither does
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)] == ["[True, False]", "[True, False]"]


def test_a_fine_tune_killed_mid_run_continues_from_its_time_checkpoint(tmp_path, tiny_tokenizer, capsys):
    model = save_tiny_model(tmp_path / "model", tiny_tokenizer)
    data = write_csv(tmp_path / "classes.csv", classification_rows(16))
    run_dir = tmp_path / "run"
    args = ["--task", "classification", "--data", str(data), "--init-from", str(model), "--seq-len", "32",
            "--batch-size", "4", "--checkpoint-every", "0", "--eval-every", "0", "--threads", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-m", "engine.finetune", *args, "--steps", "100000",
                              "--checkpoint-every-s", "0.2", "--run-dir", str(run_dir)],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not (run_dir / "checkpoints").is_dir() or not RunFolder(run_dir).checkpoints():
            assert child.poll() is None, child.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no checkpoint by time within 240 s"
            time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stderr.close()
    saved = max(steps_saved(run_dir))
    assert 0 < saved < 100000                               # the step interval is off: saved by time only
    assert finetune_main(["--resume", str(run_dir), "--steps", str(saved + 2), "--checkpoint-every-s", "0",
                          "--threads", "1", "--no-progress"]) == 0, capsys.readouterr().err[-2000:]
    assert "resuming" in capsys.readouterr().err
    steps = [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert steps == list(range(1, saved + 3)) and max(steps_saved(run_dir)) == saved + 2


def test_a_step_checkpoint_keeps_and_a_time_checkpoint_is_replaced(tmp_path, tiny_tokenizer, make_config):
    """Steps 1-10 at 4 s each, a step checkpoint every 4 and one 10 s of training after any save: time saves at
    3 (12 s) and 7 (12 s after the save at 4), step saves at 4 and 8; each time one goes when the next save lands."""
    cfg = timed_config(checkpoint_every=4)
    train, held_out = datasets(tiny_tokenizer, cfg)
    torch.manual_seed(0)
    trainer = clocked(Trainer(BertWithHeads(make_config()), tiny_tokenizer, train, held_out, cfg, tmp_path / "run",
                              task=task_for(cfg)))
    trainer.train()
    assert trainer.saves.steps == [3, 4, 7, 8, 10]
    assert steps_saved(tmp_path / "run") == [4, 8, 10]
