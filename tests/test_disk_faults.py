"""``engine.disk_faults``: what a refused write raises becomes one ``DiskFault`` sentence naming the folder and the
fault; what is not a disk fault passes through unchanged. The training runs that hit them: tests/chaos/."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import engine.disk_faults as disk_faults
from engine.disk_faults import DiskFault, disk_fault, make_folder, writing

TORCH_WRITE = "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"   # torch.save, errno lost


@pytest.mark.parametrize("code, words", [
    (errno.ENOSPC, "The disk holding {} is full (no space left on device) while writing x: free space."),
    (errno.EDQUOT, "The disk quota of {} is used up (disk quota exceeded) while writing x: free space or raise the "
                   "quota."),
    (errno.EROFS, "The folder {} is on a read-only file system while writing x: make it writable or choose another "
                  "folder."),
    (errno.EACCES, "The folder {} is not writable (permission denied) while writing x: give this user write access "
                   "to it."),
    (errno.EPERM, "The folder {} does not permit writing (operation not permitted) while writing x: give this user "
                  "write access to it."),
])
def test_each_fault_is_one_sentence_naming_the_folder(tmp_path, code, words):
    fault = disk_fault(OSError(code, os.strerror(code), str(tmp_path / "f")), tmp_path, "writing x")
    assert isinstance(fault, OSError) and fault.errno == code and fault.errno_name == errno.errorcode[code]
    assert str(fault) == words.format(tmp_path) and fault.folder == tmp_path


def test_a_write_of_a_run_names_the_step_and_the_last_good_checkpoint(tmp_path):
    kept = tmp_path / "checkpoints" / "step-000010"
    kept.mkdir(parents=True)
    fault = DiskFault(errno.ENOSPC, tmp_path / "x", "y").during_run(tmp_path, "writing the checkpoint of step 20",
                                                                    20, kept)
    assert fault.step == 20 and fault.kept == kept
    assert fault.sentence("continue with --resume") == (
        f"The disk holding {tmp_path} is full (no space left on device) while writing the checkpoint of step 20; the "
        f"last good checkpoint, step 10, is kept: free space and continue with --resume.")
    gone = DiskFault(errno.EROFS, tmp_path, "y").during_run(tmp_path, "appending to metrics.jsonl", 3, tmp_path / "no")
    assert gone.kept is None and "; no checkpoint was saved before it: make it writable" in str(gone)


def test_torchs_write_error_is_mapped_through_its_cause_or_the_folder(tmp_path, monkeypatch):
    with_cause = RuntimeError(TORCH_WRITE)
    with_cause.__context__ = OSError(errno.ENOSPC, "No space left on device")
    assert disk_fault(with_cause, tmp_path, "writing x").errno == errno.ENOSPC
    assert disk_fault(RuntimeError(TORCH_WRITE), tmp_path, "w").errno == errno.EIO     # plenty of room here
    monkeypatch.setattr(disk_faults, "free_bytes", lambda folder: 4096)               # the errno is lost: look
    fault = disk_fault(RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"),
                       tmp_path / "not" / "yet", "w")
    assert fault.errno == errno.ENOSPC and fault.folder == tmp_path / "not" / "yet"
    safetensors = Exception("Error while serializing: I/O error: Disk quota exceeded (os error 122)")
    assert disk_fault(safetensors, tmp_path, "w").errno == errno.EDQUOT


def test_what_is_not_a_disk_fault_passes_unchanged(tmp_path):
    elsewhere = PermissionError(errno.EACCES, "Permission denied", "/etc/shadow")    # a read outside the folder
    for exc in (ValueError("bad"), FileNotFoundError(errno.ENOENT, "gone"), RuntimeError("boom"), elsewhere,
                OSError(errno.EEXIST, "exists")):
        assert disk_fault(exc, tmp_path, "w") is None
        with pytest.raises(type(exc)) as caught, writing(tmp_path, "w"):
            raise exc
        assert caught.value is exc


def test_writing_and_make_folder_raise_the_fault_from_the_original(tmp_path, monkeypatch):
    with pytest.raises(DiskFault) as caught, writing(tmp_path, "writing x"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert isinstance(caught.value.__cause__, OSError) and not isinstance(caught.value.__cause__, DiskFault)

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(os, "mkdir", read_only)
    with pytest.raises(DiskFault) as caught:
        make_folder(tmp_path / "a" / "b")
    assert caught.value.folder == tmp_path and caught.value.errno == errno.EROFS
    assert str(caught.value).startswith(f"The folder {tmp_path} is on a read-only file system while creating "
                                        f"{Path(tmp_path / 'a' / 'b')}: ")
