"""Disk faults as one sentence: a write refused because the disk is full, the folder read-only or not writable.

Every write a person's disk can refuse (checkpoints and their ``training_state.pt``, exports, ``metrics.jsonl``,
``run.json``, the runs folder) runs inside ``writing(folder, action)`` (folders are made with ``make_folder``).
What such a write raises for a disk fault becomes a ``DiskFault``: an ``OSError`` of ``FAULTS`` (ENOSPC, EDQUOT,
EROFS, EACCES, EPERM, EIO); safetensors' ``SafetensorError`` ("... (os error 28)"); or the ``RuntimeError``
``torch.save`` raises ("[enforce fail at inline_container.cc:…] … unexpected pos" / "file write failed"), whose
errno is lost: it is found on the exception's cause or context, else by looking at the folder (a read-only
file system, not writable, or next to no free space left). Any other exception passes through unchanged.

A ``DiskFault`` keeps its errno (``errno_name``: "ENOSPC"), the folder, what was being done and, for a write
of a training run (``during_run``), the step and the last good checkpoint; ``str()`` is one sentence that
names the folder, the fault and the remedy, and ``sentence(then)`` adds what to do next (``--resume``)::

    The disk holding /x/runs/pretrain-1 is full (no space left on device) while writing the checkpoint of
    step 20; the last good checkpoint, step 10, is kept: free space and continue with --resume.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path
from typing import Iterator

FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)
FULL_BELOW_BYTES = 64 << 20          # a torch write that failed with less than this left: the disk is full
# what torch.save / safetensors say when a write failed (their errno is lost, or only in the text)
_TORCH_WRITE = re.compile(r"inline_container\.cc|PytorchStreamWriter|file write failed|unexpected pos \d+ vs")
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_STEP_NAME = re.compile(r"(\d+)$")
# errno -> (what is wrong, given the folder; the remedy)
_WORDS = {
    errno.ENOSPC: ("The disk holding {} is full (no space left on device)", "free space"),
    errno.EDQUOT: ("The disk quota of {} is used up (disk quota exceeded)", "free space or raise the quota"),
    errno.EROFS: ("The folder {} is on a read-only file system", "make it writable or choose another folder"),
    errno.EACCES: ("The folder {} is not writable (permission denied)", "give this user write access to it"),
    errno.EPERM: ("The folder {} does not permit writing (operation not permitted)",
                  "give this user write access to it"),
}


class DiskFault(OSError):
    """A write refused by the disk: ``errno`` (one of ``FAULTS``), the ``folder`` written in, the ``action``
    ("writing the checkpoint of step 20"); for a write of a training run also its ``step`` and the last good
    checkpoint ``kept`` (None when there is none). ``str()`` is one sentence naming the folder and the fault."""

    def __init__(self, code: int, folder: str | Path, action: str, *, step: int | None = None,
                 kept: Path | None = None, in_run: bool = False) -> None:
        super().__init__(code, os.strerror(code))
        self.folder, self.action, self.step, self.kept, self.in_run = Path(folder), action, step, kept, in_run

    @property
    def errno_name(self) -> str:
        """The symbolic errno: "ENOSPC", "EROFS", ..."""
        return errno.errorcode.get(self.errno, str(self.errno))

    def during_run(self, run_dir: str | Path, action: str, step: int, kept: Path | None) -> "DiskFault":
        """The same fault told as a write of a training run: its folder, what it wrote, its step, the last good
        checkpoint (``kept``; None when none was saved, or it is gone)."""
        kept = kept if kept is not None and kept.exists() else None
        return DiskFault(self.errno, run_dir, action, step=step, kept=kept, in_run=True)

    def sentence(self, then: str | None = None) -> str:
        """The fault in one sentence; ``then`` (e.g. "continue with … --resume …") follows the remedy."""
        fault, remedy = _WORDS.get(self.errno, ("Writing in {} failed (" + (self.strerror or "") + ")",
                                                "check the disk"))
        kept = ""
        if self.in_run:
            kept = (f"; the last good checkpoint, {_checkpoint_label(self.kept)}, is kept" if self.kept is not None
                    else "; no checkpoint was saved before it")
        return f"{fault.format(self.folder)} while {self.action}{kept}: {remedy}{f' and {then}' if then else ''}."

    def __str__(self) -> str:
        return self.sentence()


def disk_fault(exc: BaseException, folder: str | Path, action: str) -> DiskFault | None:
    """``exc`` (raised by a write in ``folder`` while doing ``action``) as a ``DiskFault``, or None when it is
    not a disk fault (a bad value, a missing file, an error about a path outside ``folder``). A ``DiskFault``
    is returned as it is. Call it before the failed write's partial files are removed: the free space they
    take is what tells a full disk when the errno was lost."""
    if isinstance(exc, DiskFault):
        return exc
    folder = Path(folder)
    code = _errno_of(exc, folder)
    if code is None and isinstance(exc, Exception) and _TORCH_WRITE.search(str(exc)):
        code = probe(folder)
    return DiskFault(code, folder, action) if code is not None else None


@contextlib.contextmanager
def writing(folder: str | Path, action: str) -> Iterator[None]:
    """Run a write in ``folder``; a disk fault it raises comes out as a ``DiskFault`` (``disk_fault``), from the
    original; anything else unchanged."""
    try:
        yield
    except Exception as exc:
        fault = disk_fault(exc, folder, action)
        if fault is None or fault is exc:
            raise
        raise fault from exc


@contextlib.contextmanager
def run_writes(run_dir: str | Path, action: str, step: int, kept: Path | None) -> Iterator[None]:
    """``writing`` for a write of a training run: its fault is told as the run's (``DiskFault.during_run``: the
    run folder, ``action``, ``step`` and the last good checkpoint ``kept``)."""
    try:
        with writing(run_dir, action):
            yield
    except DiskFault as fault:
        raise fault.during_run(run_dir, action, step, kept) from fault


def make_folder(path: str | Path) -> Path:
    """``path.mkdir(parents=True, exist_ok=True)``; a disk fault names the nearest folder that exists."""
    path = Path(path)
    with writing(existing_ancestor(path), f"creating {path}"):
        path.mkdir(parents=True, exist_ok=True)
    return path


def probe(folder: str | Path) -> int:
    """Why a write in ``folder`` failed when its errno was lost: EROFS (read-only file system), EACCES (not
    writable), ENOSPC (under ``FULL_BELOW_BYTES`` or no inodes left), else EIO."""
    where = existing_ancestor(Path(folder))
    try:
        stats = os.statvfs(where)
    except (OSError, AttributeError):                # gone meanwhile, or no statvfs (Windows)
        return errno.EIO
    if stats.f_flag & os.ST_RDONLY:
        return errno.EROFS
    if not os.access(where, os.W_OK):
        return errno.EACCES
    if free_bytes(where) < FULL_BELOW_BYTES or (stats.f_files and not stats.f_favail):
        return errno.ENOSPC
    return errno.EIO


def free_bytes(folder: str | Path) -> int:
    """Bytes an unprivileged user may still write on the disk holding ``folder``."""
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def existing_ancestor(path: Path) -> Path:
    """``path`` or the nearest folder above it that exists."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _errno_of(exc: BaseException, folder: Path) -> int | None:
    """The fault errno ``exc`` or its causes carry (an OSError's, or "(os error N)" in a message); None when
    none does or the OSError is about a path outside ``folder``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return current.errno if current.errno in FAULTS and _inside(current.filename, folder) else None
        found = _OS_ERROR.search(str(current))
        if found and int(found.group(1)) in FAULTS:
            return int(found.group(1))
        current = current.__cause__ or current.__context__
    return None


def _inside(filename: object, folder: Path) -> bool:
    """Whether an OSError's ``filename`` is ``folder`` or lies under it (True when it names none)."""
    if not isinstance(filename, (str, bytes, os.PathLike)):
        return True
    path, root = os.path.abspath(os.fsdecode(filename)), os.path.abspath(folder)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _checkpoint_label(checkpoint: Path) -> str:
    """"step 10" for a checkpoint folder named ``step-000010``, else its name."""
    found = _STEP_NAME.search(checkpoint.name)
    return f"step {int(found.group(1))}" if found else checkpoint.name


__all__ = ["DiskFault", "FAULTS", "disk_fault", "free_bytes", "make_folder", "probe", "run_writes", "writing"]
