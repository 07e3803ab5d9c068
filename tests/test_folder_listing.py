"""engine/folder_listing.py: a served folder is listed by name first, then resolved; an entry that cannot be
resolved (a loop, a dangling link, one the server may not look at) is skipped with one warning, a link never
leads out of the folder, a pipe is never a file, and nothing raises."""
from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from engine import folder_listing
from engine.folder_listing import Entry, links_leaving, list_entries


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "served"
    root.mkdir()
    (root / "good.conllu").write_text("x", encoding="utf-8")
    (root / "notes.txt").write_text("x", encoding="utf-8")
    (root / ".hidden.conllu").write_text("x", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "alias.conllu").symlink_to(root / "good.conllu")
    (tmp_path / "secret.conllu").write_text("x", encoding="utf-8")
    (root / "leak.conllu").symlink_to(tmp_path / "secret.conllu")
    (root / "a.conllu").symlink_to(root / "b.conllu")
    (root / "b.conllu").symlink_to(root / "a.conllu")
    (root / "self.conllu").symlink_to("self.conllu")
    (root / "gone.conllu").symlink_to(root / "nowhere.conllu")
    os.mkfifo(root / "pipe.conllu")
    return root


def test_files_with_the_suffix_are_listed_with_their_targets_and_nothing_else(folder: Path) -> None:
    found = list_entries(folder, suffixes=(".CONLLU",))
    assert [e.name for e in found] == ["alias.conllu", "good.conllu"]
    assert found[0] == Entry("alias.conllu", folder / "alias.conllu", (folder / "good.conllu").resolve(), False)


def test_folders_are_listed_when_asked_and_files_of_any_name_without_suffixes(folder: Path) -> None:
    assert [e.name for e in list_entries(folder, files=False, folders=True)] == ["sub"]
    everything = list_entries(folder, folders=True)
    assert [(e.name, e.is_dir) for e in everything] == [
        ("alias.conllu", False), ("good.conllu", False), ("notes.txt", False), ("sub", True)]


def test_a_link_may_lead_into_another_allowed_folder_only_when_within_names_it(folder: Path, tmp_path: Path) -> None:
    assert "leak.conllu" in [e.name for e in list_entries(folder, within=(folder.resolve(), tmp_path.resolve()))]
    assert "leak.conllu" not in [e.name for e in list_entries(folder)]


def test_each_entry_that_cannot_be_read_is_warned_about_once_naming_it_and_why(folder: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.folder_listing"):
        list_entries(folder, suffixes=(".conllu",))
        list_entries(folder, suffixes=(".conllu",))            # listed again: no second warning
    lines = sorted(r.getMessage() for r in caplog.records)
    assert lines == ["skipped a.conllu in served: a symlink loop", "skipped b.conllu in served: a symlink loop",
                     "skipped gone.conllu in served: a link to nothing (dangling)",
                     "skipped pipe.conllu in served: not a regular file (a named pipe)",
                     "skipped self.conllu in served: a symlink loop"]
    assert not any(str(folder) in line for line in lines)          # names, not server paths


def test_the_name_is_checked_before_anything_is_resolved(folder: Path, monkeypatch) -> None:
    resolved: list[str] = []
    real = os.path.realpath

    def spy(path, *args, **kwargs):
        resolved.append(os.path.basename(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(folder_listing.os.path, "realpath", spy)
    list_entries(folder, suffixes=(".txt",))
    assert resolved == ["served", "notes.txt"]                     # the folder itself, then the one matching name


def test_an_entry_the_server_may_not_look_at_is_skipped(folder: Path, monkeypatch, caplog) -> None:
    locked = str(folder / "good.conllu")
    real_lstat, real_stat = os.lstat, os.stat

    def guard(real):
        def call(path, *args, **kwargs):
            if os.fspath(path) == locked:
                raise PermissionError(errno.EACCES, "Permission denied", locked)
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "lstat", guard(real_lstat))
    monkeypatch.setattr(os, "stat", guard(real_stat))
    with caplog.at_level(logging.WARNING, logger="engine.folder_listing"):
        assert list_entries(folder, suffixes=(".conllu",)) == []   # the alias leads to it too
    assert "skipped good.conllu in served: Permission denied" in [r.getMessage() for r in caplog.records]


def test_a_missing_or_unlistable_folder_gives_nothing(tmp_path: Path, monkeypatch) -> None:
    assert list_entries(tmp_path / "missing") == [] and links_leaving(tmp_path / "missing", (tmp_path,)) == []
    (tmp_path / "loop").symlink_to("loop")
    assert list_entries(tmp_path / "loop", folders=True) == []

    def denied(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    monkeypatch.setattr(os, "scandir", denied)
    assert list_entries(tmp_path, folders=True) == []


def test_links_leaving_names_links_out_of_the_allowed_folders_and_never_a_loop(folder: Path, tmp_path: Path) -> None:
    (folder / "out-nowhere").symlink_to(tmp_path / "elsewhere" / "missing")
    assert links_leaving(folder, (folder.resolve(),)) == ["leak.conllu", "out-nowhere"]
    assert links_leaving(folder, (tmp_path.resolve(),)) == []
