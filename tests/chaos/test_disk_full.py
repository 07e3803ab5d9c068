"""Issue 45, item 3: a full disk while a checkpoint is written. The trainer, the app's worker and the command line
each say it in one sentence (``DiskFault``) naming the run folder, "full", the step being saved (never total + 1)
and the last good checkpoint, which is kept intact: the failed write's staging folder is removed, nothing half
written is renamed in, and resuming continues the run.

The fault is injected at each seam a checkpoint write has (the weights' ``save_file`` raising ENOSPC after a
partial write, safetensors' own error, ``torch.save``'s RuntimeError whose errno is lost), and once for real on a
small tmpfs (skipped, saying why, where mounting is not allowed: the injected tests always run)."""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError

import engine.checkpoints.hf_format as hf_format
import engine.disk_faults as disk_faults
from engine.checkpoints.hf_format import load_directory
from engine.disk_faults import DiskFault, writing
from engine.pretrain import main
from engine.training.jobs.setup import prepare_job
from engine.training.runs.state import read_training_state
from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.training_worker import TrainingWorker
from support.job_helpers import documents, pretraining
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")
TORCH_WRITE = "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def full_at(monkeypatch, step: int, seam: str = "weights") -> None:
    """The disk fills up while the checkpoint of ``step`` is written, at ``seam``: the weights (an OSError after
    half a file), safetensors' error ("(os error 28)") or torch.save of training_state.pt (errno lost)."""
    name = f"step-{step:06d}"
    real_save_file, real_torch_save = hf_format.save_file, torch.save

    def save_file(tensors, filename, *args, **kwargs):
        if name not in str(filename):
            return real_save_file(tensors, filename, *args, **kwargs)
        Path(filename).write_bytes(b"\0" * 1000)
        if seam == "safetensors":
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)

    def torch_save(obj, handle, *args, **kwargs):
        if name not in str(getattr(handle, "name", handle)):
            return real_torch_save(obj, handle, *args, **kwargs)
        handle.write(b"\0" * 1000)
        raise RuntimeError(TORCH_WRITE)          # no cause: only the folder can tell that the disk is full

    if seam == "torch":
        monkeypatch.setattr(torch, "save", torch_save)
        monkeypatch.setattr(disk_faults, "free_bytes", lambda folder: 8192)
    else:
        monkeypatch.setattr(hf_format, "save_file", save_file)


def assert_kept(run_dir: Path, step: int) -> None:
    """Only the last good checkpoint is in the run (no staging folder, nothing half written), and it loads."""
    checkpoints = run_dir / "checkpoints"
    assert sorted(os.listdir(checkpoints)) == [f"step-{step:06d}"]
    assert read_training_state(checkpoints / f"step-{step:06d}")["step"] == step
    assert load_directory(checkpoints / f"step-{step:06d}").tokenizer is not None


@pytest.mark.parametrize("seam", ["weights", "safetensors", "torch"])
def test_a_full_disk_at_the_last_checkpoint_says_so_and_resume_finishes(tmp_path, tokenizer_dir, monkeypatch, seam):
    run_dir = tmp_path / "run"
    trainer = prepare_job(pretraining(tmp_path, tokenizer_dir)).trainer      # 6 steps, checkpoints at 3 and 6
    full_at(monkeypatch, 6, seam)
    with pytest.raises(DiskFault) as caught:
        trainer.train()
    fault = caught.value
    assert fault.errno == errno.ENOSPC and fault.step == 6 and fault.folder == run_dir
    assert str(fault) == (f"The disk holding {run_dir} is full (no space left on device) while writing the "
                          f"checkpoint of step 6; the last good checkpoint, step 3, is kept: free space.")
    assert_kept(run_dir, 3)
    monkeypatch.undo()
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run_dir))).trainer
    assert resumed.global_step == 3 and resumed.train().step == 6
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["step-000003", "step-000006"]


def test_the_app_reports_the_step_being_saved_and_continues(tmp_path, tokenizer_dir, monkeypatch):
    """The bug: "failed at step 7 [of 6]: [enforce fail at inline_container.cc…]"; now the sentence, step 6."""
    worker = TrainingWorker(tmp_path / "runs")
    run_dir = tmp_path / "runs" / "demo"
    full_at(monkeypatch, 6, "torch")
    try:
        worker.start(pretraining(tmp_path, tokenizer_dir).replace(run_dir=str(run_dir)))
        assert worker.join(60)
        status = worker.status()
        assert status.state == "failed" and status.step == 6, status
        assert status.message.startswith(f"The disk holding {run_dir} is full (no space left on device) while "
                                         f"writing the checkpoint of step 6; the last good checkpoint, step 3, is kept")
        assert "Continue a run" in status.message and "step 7" not in status.message and "enforce" not in status.message
        assert status.last_checkpoint == run_dir / "checkpoints" / "step-000003"
        assert_kept(run_dir, 3)
        monkeypatch.undo()                     # a run on given documents resumes with them given again
        worker.start(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run_dir)))
        assert worker.join(60) and worker.status().state == "finished" and worker.status().step == 6
    finally:
        worker.close(timeout_s=30)


def cli_args(tmp_path: Path, tokenizer_dir: Path) -> list[str]:
    corpus = tmp_path / "corpus.txt"
    words = list(WORDS)
    corpus.write_text("\n\n".join(" ".join(words[(d * 5 + k) % len(words)] for k in range(40)) + "."
                                  for d in range(30)), encoding="utf-8")
    return ["--corpus", str(corpus), "--tokenizer", str(tokenizer_dir), "--seq-len", "32", "--batch-size", "4",
            "--steps", "4", "--checkpoint-every", "2", "--eval-every", "0", "--threads", "1", "--no-progress",
            "--run-dir", str(tmp_path / "run")]


def test_the_command_line_prints_the_sentence_and_no_traceback(tmp_path, tokenizer_dir, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    full_at(monkeypatch, 4, "weights")
    assert main(cli_args(tmp_path, tokenizer_dir)) == 74
    err = capsys.readouterr().err
    assert (f"The disk holding {run_dir} is full (no space left on device) while writing the checkpoint of step 4; "
            f"the last good checkpoint, step 2, is kept: free space and continue with python -m engine.pretrain "
            f"--resume {run_dir}.") in err
    assert "Traceback" not in err
    assert_kept(run_dir, 2)
    monkeypatch.undo()
    assert main(["--resume", str(run_dir), "--threads", "1", "--no-progress"]) == 0
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["step-000002", "step-000004"]


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 8 MB tmpfs (root only; skipped, saying so, where mounting is denied)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); the injected tests "
                    f"above cover the same faults")
    try:
        yield mount
    finally:                                   # lazily: a finished run's files may still be open (memory maps)
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_a_really_full_tmpfs(small_tmpfs, tokenizer_dir):
    """No injection: the disk fills up for real between the checkpoints of step 3 and step 6."""
    run_dir = small_tmpfs / "run"
    trainer = prepare_job(pretraining(small_tmpfs, tokenizer_dir)).trainer
    trainer.train(num_steps=3)
    stats = os.statvfs(small_tmpfs)
    filler = small_tmpfs / "filler"
    filler.write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - 12 * 4096))   # room for metrics.jsonl only
    with pytest.raises(DiskFault) as caught:
        trainer.train()
    assert caught.value.step == 6 and (f"The disk holding {run_dir} is full (no space left on device) while writing "
                                       f"the checkpoint of step 6") in str(caught.value)
    assert "the last good checkpoint, step 3, is kept" in str(caught.value)
    with pytest.raises(DiskFault) as lost:             # torch.save to a path: the errno is lost, the folder tells
        with writing(small_tmpfs, "writing a tensor"):
            torch.save(torch.zeros(1 << 20), small_tmpfs / "big.pt")
    assert lost.value.errno == errno.ENOSPC and isinstance(lost.value.__cause__, RuntimeError)
    (small_tmpfs / "big.pt").unlink(missing_ok=True)
    filler.unlink()
    assert_kept(run_dir, 3)
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(), resume_from=str(run_dir))).trainer
    assert resumed.train().step == 6
