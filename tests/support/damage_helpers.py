"""Damage for a runs folder: folders the server cannot read (simulated: the tests run as root, who reads
everything) and the kinds of file damage the damaged-runs tests write."""
from __future__ import annotations

import contextlib
import os
import pathlib
from pathlib import Path
from typing import Iterator

import pytest

from support.probing_helpers import write_run


@contextlib.contextmanager
def unreadable(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> Iterator[None]:
    """Make ``folders`` behave as ``chmod 000`` folders do for a user who is not root: the folder itself can
    be seen (``stat`` works) but not listed, and nothing inside it can be stat'ed, listed or opened: each
    raises ``PermissionError``, from ``os`` and ``pathlib`` alike."""
    locked = [os.path.abspath(f) for f in folders]

    def denied(path: object, listing: bool) -> bool:
        """Listing fails on the folder and below it; stat and open fail below it."""
        try:
            text = os.path.abspath(os.fspath(path))
        except TypeError:                      # a file descriptor
            return False
        return any((listing and text == f) or text.startswith(f + os.sep) for f in locked)

    def guard(real, listing: bool):
        def call(path=".", *args, **kwargs):
            if denied(path, listing):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    def guard_open(real):
        def call(self, *args, **kwargs):
            if denied(self, False):
                raise PermissionError(13, "Permission denied", str(self))
            return real(self, *args, **kwargs)
        return call

    with monkeypatch.context() as patch:
        patch.setattr(os, "scandir", guard(os.scandir, True))
        patch.setattr(os, "listdir", guard(os.listdir, True))
        patch.setattr(os, "stat", guard(os.stat, False))
        patch.setattr(os, "lstat", guard(os.lstat, False))
        patch.setattr(pathlib.Path, "open", guard_open(pathlib.Path.open))
        yield


def check_unreadable_works(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """The simulation fails where a real ``chmod 000`` folder fails (asserted, so the tests stand on it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "inside").mkdir(exist_ok=True)
    with unreadable(monkeypatch, folder):
        assert folder.exists()
        for attempt in (lambda: os.scandir(folder), lambda: list(folder.iterdir()),
                        lambda: (folder / "inside").is_dir(), lambda: (folder / "x.json").read_bytes()):
            with pytest.raises(PermissionError):
                attempt()


@pytest.fixture
def runs(tmp_path: Path, tiny_tokenizer) -> Path:
    """A runs folder with ``good`` (steps 2, 4) and ``bad`` (steps 1, 3): real tiny checkpoints to damage."""
    root = tmp_path / "runs"
    write_run(root, tiny_tokenizer, steps=(2, 4), run="good")
    write_run(root, tiny_tokenizer, steps=(1, 3), run="bad")
    return root
