"""Local model folders (explorer/models/local_folders.py): a folder inside the allowed ones gets a short key that names no
server path, two allowed folders with the same name get distinct keys, and each key maps back to its folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.models.local_folders import LocalFolders, short_key
from explorer.models.keys import ModelKey


def test_two_allowed_folders_with_one_name_give_two_keys_that_map_back(tmp_path: Path) -> None:
    first, second = (tmp_path / side / "models" for side in ("a", "b"))
    for root in (first, second):
        (root / "mine").mkdir(parents=True)
    folders = LocalFolders((first.resolve(), second.resolve()), runs_root=None)
    one = folders.short(ModelKey.local(str(first / "mine")))
    two = folders.short(ModelKey.local(str(second / "mine")))
    assert (one.text, two.text) == ("local:models/mine", "local:models/mine~2")
    assert str(tmp_path) not in one.text + two.text
    assert folders.folder(one) == (first / "mine").resolve() and folders.folder(two) == (second / "mine").resolve()
    assert folders.short(one) is one and folders.short(ModelKey.local(str(first / "mine"))) == one   # named once
    assert short_key(first.resolve(), folders.roots) == ModelKey.local("models")          # the root itself


def test_the_runs_folder_is_allowed_and_nothing_outside(tmp_path: Path) -> None:
    runs, outside = tmp_path / "runs", tmp_path / "elsewhere"
    (runs / "run-a").mkdir(parents=True)
    outside.mkdir()
    folders = LocalFolders((), runs_root=runs)
    assert folders.holds(str(runs / "run-a")) and not folders.holds(str(outside)) and not folders.holds("\x00")
    assert folders.short(ModelKey.local(str(runs / "run-a"))).text == "local:runs/run-a"
    with pytest.raises(ValueError, match="inside the allowed model folders"):
        folders.short(ModelKey.local(str(outside)))
    with pytest.raises(FileNotFoundError, match="no model folder"):
        folders.folder(ModelKey.local(str(runs / "absent")))
