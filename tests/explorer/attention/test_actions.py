"""Attention exports do not pile up: each export gets a fresh folder and old ones are removed. The head view's
heads are checked, and a refusal names every wrong head (issue 45: ``[99, -1]`` named only ``-1``)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from explorer.attention.actions import MAX_NAMED, new_export_folder, view_heads


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


@pytest.mark.parametrize("heads, named", [
    ([99, -1], "[-1, 99]"), ([-1, 0], "[-1]"), ([-3, 0, 4, 7], "[-3, 4, 7]"), ([4, 9], "[4, 9]"),
    ([-2, -1, 12], "[-2, -1, 12]"),
])
def test_every_wrong_head_is_named(heads: list[int], named: str) -> None:
    with pytest.raises(ValueError) as raised:
        view_heads(heads, 4)
    assert str(raised.value) == f"heads {named} do not exist: this model's layers have heads 0 to 3"


def test_many_wrong_heads_are_named_up_to_a_limit_and_odd_values_are_one_sentence() -> None:
    with pytest.raises(ValueError, match=r"heads \[-1, 4, 5, .*, …\] do not exist") as raised:
        view_heads([-1, *range(4, 10_000)], 4)
    assert len(str(raised.value)) < 200 and str(MAX_NAMED + 2) in str(raised.value)
    for odd in ([float("inf")], [float("nan")], ["x"], 5):
        with pytest.raises(ValueError, match="heads for the head view must be numbers from 0 to 3"):
            view_heads(odd, 4)


def test_heads_past_the_last_are_dropped_when_others_remain() -> None:
    assert view_heads(None, 4) == [0, 1, 2, 3]
    with pytest.warns(UserWarning, match=r"leaves out heads \[9\]"):
        assert view_heads([9, 1, 1, 0], 4) == [0, 1]
