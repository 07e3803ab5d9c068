"""Issue 45, item 3: a runs folder (or an export folder) the disk will not let us write: read-only (EROFS), not
writable (EACCES, injected: root ignores modes, so chmod cannot make one here), or over quota (EDQUOT). The
command line, the app's worker and the trainer each answer with one sentence naming the folder and the fault;
nothing is half created, and the last good checkpoint is kept."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch

import engine.training.runs.state as state
from engine.disk_faults import DiskFault
from engine.model.heads import BertWithHeads
from engine.pretrain import main
from engine.training.jobs.setup import prepare_job
from engine.training.runs.export import export_zip
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import write_spec
from engine.training.runs.state import read_training_state, write_checkpoint
from engine.training.worker.errors import RunFolderError
from engine.training.worker.training_worker import TrainingWorker
from support.job_helpers import pretraining
from tests.chaos.test_disk_full import cli_args

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def refuse_mkdir(monkeypatch, under: Path, code: int, when=lambda path: True) -> None:
    """``os.mkdir`` of anything under ``under`` fails with ``code`` (a read-only or not writable folder)."""
    real = os.mkdir

    def mkdir(path, *args, **kwargs):
        if Path(path).is_relative_to(under) and Path(path) != under and when(Path(path)):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


def test_the_command_line_says_the_runs_folder_is_read_only(tmp_path, tokenizer_dir, monkeypatch, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    args = cli_args(tmp_path, tokenizer_dir)
    args[args.index("--run-dir") + 1] = str(runs / "pretrain-1")
    refuse_mkdir(monkeypatch, runs, errno.EROFS)
    assert main(args) == 74
    err = capsys.readouterr().err
    assert (f"The folder {runs} is on a read-only file system while creating {runs / 'pretrain-1'}"
            in err), err
    assert err.rstrip().endswith("make it writable or choose another folder.") and "Traceback" not in err
    assert os.listdir(runs) == []


def test_the_app_refuses_to_start_in_a_read_only_runs_folder(tmp_path, tokenizer_dir, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    refuse_mkdir(monkeypatch, runs, errno.EROFS)
    worker = TrainingWorker(runs)
    with pytest.raises(RunFolderError) as caught:
        worker.start(pretraining(tmp_path, tokenizer_dir).replace(run_dir=None))
    assert str(caught.value).startswith(f"The folder {runs} is on a read-only file system while creating the run "
                                        f"folder pretraining-")
    assert os.listdir(runs) == [] and not worker.status().active


def test_a_checkpoint_in_a_folder_that_is_not_writable(tmp_path, tokenizer_dir, monkeypatch):
    run_dir = tmp_path / "run"
    trainer = prepare_job(pretraining(tmp_path, tokenizer_dir)).trainer
    refuse_mkdir(monkeypatch, run_dir / "checkpoints", errno.EACCES, lambda path: ".step-000006.tmp" in path.name)
    with pytest.raises(DiskFault) as caught:
        trainer.train()
    assert caught.value.errno == errno.EACCES and caught.value.step == 6
    assert str(caught.value) == (f"The folder {run_dir} is not writable (permission denied) while writing the "
                                 f"checkpoint of step 6; the last good checkpoint, step 3, is kept: give this user "
                                 f"write access to it.")
    assert os.listdir(run_dir / "checkpoints") == ["step-000003"]
    assert read_training_state(run_dir / "checkpoints" / "step-000003")["step"] == 3


def test_metrics_over_quota_name_the_step(tmp_path, tokenizer_dir, monkeypatch):
    run_dir = tmp_path / "run"
    trainer = prepare_job(pretraining(tmp_path, tokenizer_dir)).trainer
    real_open = open

    def over_quota(path, mode="r", *args, **kwargs):
        if str(path).endswith("metrics.jsonl") and "a" in mode and trainer.global_step == 5:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(state, "open", over_quota, raising=False)
    with pytest.raises(DiskFault) as caught:
        trainer.train()
    assert caught.value.step == 5 and str(caught.value) == (
        f"The disk quota of {run_dir} is used up (disk quota exceeded) while appending to metrics.jsonl; the last "
        f"good checkpoint, step 3, is kept: free space or raise the quota.")


def test_run_json_and_exports_on_a_refusing_disk(tmp_path, make_config, tiny_tokenizer, monkeypatch):
    checkpoint = tmp_path / "runs" / "demo" / "checkpoints" / "step-000002"
    torch.manual_seed(0)
    write_checkpoint(BertWithHeads(make_config()), tiny_tokenizer, checkpoint, {"format": 1, "step": 2},
                     {"step": 2, "epoch": 0, "metrics": {}, "created": 1.0, "config": {}})
    run = RunFolder(tmp_path / "runs" / "demo")
    real_write_text = Path.write_text

    def read_only(self, *args, **kwargs):
        if self.name == "run.json":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", read_only)
    with pytest.raises(DiskFault, match=f"^The folder {run.root} is on a read-only file system while writing "
                                        f"run.json: "):
        write_spec(run, {"task": "pretraining"})
    exports = tmp_path / "exports"

    def full(source, sink, *args, **kwargs):
        sink.write(source.read(1000))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("shutil.copyfileobj", full)
    with pytest.raises(DiskFault, match=f"^The disk holding {exports} is full .* while writing the export "
                                        f"demo-step-000002.zip: free space.$"):
        export_zip(checkpoint, exports)
    assert os.listdir(exports) == []                  # no partial zip left
