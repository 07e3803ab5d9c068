"""Attention exports do not pile up: each export gets a fresh folder and old ones are removed."""
from __future__ import annotations

import os
import time
from pathlib import Path

from explorer.attention.actions import new_export_folder


def test_each_export_gets_its_own_folder_and_old_ones_are_removed(tmp_path: Path) -> None:
    old = Path(new_export_folder(tmp_path))
    (old / "attention-L0-H0.png").write_bytes(b"png")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    recent = Path(new_export_folder(tmp_path))
    newest = Path(new_export_folder(tmp_path))
    assert not old.exists()                       # older than an hour: gone
    assert recent.is_dir() and newest.is_dir() and recent != newest
    assert {p.parent for p in (recent, newest)} == {tmp_path}


def test_pruning_leaves_other_folders_and_symlinks_alone(tmp_path: Path) -> None:
    keep = tmp_path / "not-an-export"
    keep.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "attention-export-link").symlink_to(target, target_is_directory=True)
    hours_ago = time.time() - 2 * 3600
    for path in (keep, target):
        os.utime(path, (hours_ago, hours_ago))
    new_export_folder(tmp_path)
    assert keep.is_dir() and target.is_dir() and (tmp_path / "attention-export-link").is_symlink()
