"""Every listing of a served folder (treebanks, corpora, local model folders, runs) lists its good entry and
skips a symlink loop (``a <-> b`` and a link to itself), a dangling link, an entry the server may not look at
and a named pipe, without raising; and the app builds, and a treebank loads, with such entries in its corpus
folder. The tests run as root, who may look at anything (``chmod 000`` on a file does not even stop ``stat``
for others): "may not look at" is ``os.stat`` / ``os.lstat`` raising ``PermissionError`` for that one entry."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from engine.training.runs.run_catalog import checkpoints_newest_first, find_run, run_names, run_summaries
from engine.training.runs.run_folder import RunFolder
from explorer.models.local_folders import LocalFolders
from explorer.models.keys import ModelKey
from explorer.syntax.treebanks import server_treebanks, treebank_choices, treebank_path
from explorer.server_corpora import CORPUS_DIRS_ENV, server_corpora, server_corpus_path
from explorer.training.text_source import corpus_choices

LINE = "1\tword\t_\tNOUN\t_\t_\t0\troot\t_\t_\n"


def poison(folder: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put every bad entry into ``folder``, each named with ``suffix`` (so a name check alone lets it through):
    a loop of two links, a link to itself, a dangling link, a pipe, and ``locked<suffix>``, which exists but
    may not be looked at."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"a{suffix}").symlink_to(f"b{suffix}")
    (folder / f"b{suffix}").symlink_to(f"a{suffix}")
    (folder / f"self{suffix}").symlink_to(f"self{suffix}")
    (folder / f"gone{suffix}").symlink_to(folder / f"nowhere{suffix}")
    os.mkfifo(folder / f"pipe{suffix}")
    locked = folder / f"locked{suffix}"
    if suffix:
        locked.write_text(LINE, encoding="utf-8")
    else:
        (locked / "checkpoints").mkdir(parents=True)
    deny(monkeypatch, locked)


def deny(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """``os.stat`` and ``os.lstat`` of ``path`` and of anything below it raise ``PermissionError`` (as for a user
    who may not look)."""
    denied = os.path.abspath(path)
    for name in ("stat", "lstat"):
        real = getattr(os, name)

        def call(target, *args, _real=real, **kwargs):
            text = "" if isinstance(target, int) else os.path.abspath(os.fspath(target))
            if text == denied or text.startswith(denied + os.sep):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(target))
            return _real(target, *args, **kwargs)

        monkeypatch.setattr(os, name, call)


BAD = ("a", "b", "self", "gone", "pipe", "locked")


def test_treebanks_list_the_good_file_and_skip_loops_links_pipes_and_locked_entries(tmp_path, monkeypatch) -> None:
    root = tmp_path / "corpora"
    poison(root, ".conllu", monkeypatch)
    (root / "good.conllu").write_text(LINE, encoding="utf-8")
    roots = (root.resolve(),)
    assert list(server_treebanks(roots)) == ["server:good.conllu"]
    assert [key for _, key in treebank_choices(roots)] == ["bundled", "server:good.conllu"]
    assert treebank_path("server:good.conllu", roots) == root.resolve() / "good.conllu"
    for name in BAD:
        with pytest.raises(ValueError, match="choose one of: bundled, server:good.conllu"):
            treebank_path(f"server:{name}.conllu", roots)


def test_corpora_list_the_good_file_and_folder_and_skip_the_bad_entries(tmp_path, monkeypatch) -> None:
    root = tmp_path / "corpora"
    poison(root, ".txt", monkeypatch)
    (root / "loops").symlink_to("loops")                                  # a folder-like name that loops
    (root / "good.txt").write_text("One. Two.\n\nThree.\n", encoding="utf-8")
    (root / "wiki").mkdir()
    (root / "wiki" / "a.txt").write_text("One. Two.\n", encoding="utf-8")
    (root / "wiki" / "x.txt").symlink_to("y.txt")                         # a loop deep inside a corpus folder
    (root / "wiki" / "y.txt").symlink_to("x.txt")
    monkeypatch.setenv(CORPUS_DIRS_ENV, str(root))
    assert list(server_corpora()) == ["server:good.txt", "server:wiki"]
    assert corpus_choices()[-2:] == ["server:good.txt", "server:wiki"]
    assert server_corpus_path("server:good.txt") == root.resolve() / "good.txt"
    assert server_corpus_path("server:wiki") == root.resolve() / "wiki"
    for name in (*(f"{bad}.txt" for bad in BAD), "loops"):
        with pytest.raises(ValueError, match="no server corpus"):
            server_corpus_path(f"server:{name}")
    monkeypatch.setenv(CORPUS_DIRS_ENV, str(root / "loops"))             # a corpus folder that is itself a loop
    assert server_corpora() == {} and server_treebanks() == {}


def test_local_model_folders_load_beside_and_despite_bad_entries(tmp_path, monkeypatch) -> None:
    models, outside = tmp_path / "models", tmp_path / "outside"
    (models / "mine").mkdir(parents=True)
    (models / "mine" / "config.json").write_text("{}", encoding="utf-8")
    outside.mkdir()
    poison(models, "", monkeypatch)                                       # beside the model folder
    poison(models / "mine", ".bin", monkeypatch)                          # inside it: they lead nowhere
    folders = LocalFolders((models.resolve(),), runs_root=None)
    key = folders.short(ModelKey.local(str(models / "mine")))
    assert key.text == "local:models/mine" and folders.folder(key) == (models / "mine").resolve()
    assert folders.holds(str(models / "mine"))
    for name in BAD:
        assert not folders.holds(str(models / name))
        with pytest.raises(FileNotFoundError, match="no model folder"):
            folders.short(ModelKey.local(str(models / name)))
    (models / "mine" / "leak.bin").symlink_to(outside)                    # a link out is still refused
    with pytest.raises(ValueError, match="leak.bin in .* links outside the allowed model folders"):
        folders.folder(key)


def test_runs_list_the_good_run_and_skip_the_bad_entries(tmp_path, monkeypatch) -> None:
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    (runs / "good" / "checkpoints").mkdir(parents=True)
    (elsewhere / "checkpoints").mkdir(parents=True)
    (runs / "away").symlink_to(elsewhere)                                 # a run folder outside the runs folder
    poison(runs, "", monkeypatch)
    assert [run.name for run in RunFolder.runs_under(runs, unreadable=True)] == ["good"]
    assert run_names(runs) == ("good",)
    assert [summary.name for summary in run_summaries(runs)] == ["good"]
    assert checkpoints_newest_first(runs) == []
    assert find_run(runs, "good").name == "good"
    for name in BAD:
        with pytest.raises(FileNotFoundError, match=f"the run {name}"):
            find_run(runs, name)


def built_app(tmp_path: Path, corpora: Path, monkeypatch):
    """The app built (not launched) with ``corpora`` as its corpus folder, ``tmp_path``'s models and runs."""
    import app
    from explorer.services import default_services

    monkeypatch.setenv(CORPUS_DIRS_ENV, str(corpora))
    monkeypatch.setenv("EXPLORER_MODEL_DIRS", str(tmp_path / "models"))
    monkeypatch.chdir(tmp_path)
    services = default_services(runs_root=tmp_path / "runs")
    try:
        return app.create_app(services)
    finally:
        services.get_worker().close(timeout_s=30)


def test_the_app_builds_and_loads_a_treebank_with_loops_in_its_corpus_folder(tmp_path, monkeypatch) -> None:
    corpora = tmp_path / "corpora"
    poison(corpora, ".conllu", monkeypatch)
    (corpora / "c.txt").symlink_to("d.txt")
    (corpora / "d.txt").symlink_to("c.txt")
    (corpora / "good.conllu").write_text(LINE, encoding="utf-8")
    (corpora / "good.txt").write_text("One. Two.\n", encoding="utf-8")
    poison(tmp_path / "runs", "", monkeypatch)
    poison(tmp_path / "models", "", monkeypatch)
    demo = built_app(tmp_path, corpora, monkeypatch)
    offered = {value for block in demo.blocks.values() if type(block).__name__ == "Dropdown"
               for _, value in (block.choices or [])}
    assert {"server:good.conllu", "server:good.txt"} <= offered
    assert not any(value.startswith(("server:a.", "server:c.", "server:self")) for value in map(str, offered))
    assert treebank_path("server:good.conllu") == corpora.resolve() / "good.conllu"


def test_the_app_starts_when_a_configured_folder_is_itself_a_symlink_loop(tmp_path, monkeypatch) -> None:
    """``EXPLORER_MODEL_DIRS``, ``EXPLORER_CORPUS_DIRS`` and the runs folder each a loop (``x -> x``): the app
    builds, its launch options block the runs folder as given, and the folders offer nothing."""
    import app
    from explorer.models.registry import ModelRegistry

    for name in ("models", "corpora", "runs"):
        (tmp_path / name).symlink_to(name)                       # a self-loop
    demo = built_app(tmp_path, tmp_path / "corpora", monkeypatch)
    assert demo.blocks and server_treebanks() == {} and server_corpora() == {}
    assert app.launch_options({"EXPLORER_RUNS_DIR": str(tmp_path / "runs")})["blocked_paths"] == [str(tmp_path / "runs")]
    registry = ModelRegistry(runs_root=tmp_path / "runs", allowed_dirs=(tmp_path / "models",), default_dir=None)
    assert registry.allowed_dirs == (tmp_path / "models",)
    assert LocalFolders((tmp_path / "models",), tmp_path / "runs").roots == (tmp_path / "models", tmp_path / "runs")
