"""explorer/syntax/treebanks.py: the CoNLL-U files the server keeps in its corpus folders, named by key, never
by path; a link out of the folders, a hidden file or another kind of file is not offered."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.syntax.treebanks import BUNDLED, server_treebanks, treebank_choices, treebank_path

LINE = "1\tword\t_\tNOUN\t_\t_\t0\troot\t_\t_\n"


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, ...]:
    first, second, outside = tmp_path / "corpora", tmp_path / "more", tmp_path / "outside"
    for folder in (first, second, outside):
        folder.mkdir()
    (first / "ewt.conllu").write_text(LINE, encoding="utf-8")
    (first / "notes.txt").write_text("not a treebank", encoding="utf-8")
    (first / ".hidden.conllu").write_text(LINE, encoding="utf-8")
    (second / "ewt.conllu").write_text(LINE, encoding="utf-8")              # the first folder wins the name
    (second / "gum.conll").write_text(LINE, encoding="utf-8")
    (outside / "secret.conllu").write_text(LINE, encoding="utf-8")
    (first / "leak.conllu").symlink_to(outside / "secret.conllu")             # leads outside: not offered
    (first / "inside.conllu").symlink_to(first / "ewt.conllu")                # stays in its folder: offered
    (first / "across.conllu").symlink_to(second / "gum.conll")                # into another folder: not offered
    return first.resolve(), second.resolve()


def test_the_server_offers_its_conllu_files_by_key(roots) -> None:
    found = server_treebanks(roots)
    assert sorted(found) == ["server:ewt.conllu", "server:gum.conll", "server:inside.conllu"]
    assert found["server:ewt.conllu"] == roots[0] / "ewt.conllu"
    assert treebank_choices(roots)[0][1] == BUNDLED and [k for _, k in treebank_choices(roots)][1:] == list(found)


def test_a_key_names_a_file_and_nothing_else_does(roots) -> None:
    assert treebank_path("", roots) is None and treebank_path(BUNDLED, roots) is None
    assert treebank_path("server:gum.conll", roots) == roots[1] / "gum.conll"
    for key in ("server:leak.conllu", "server:across.conllu", "server:notes.txt", "server:.hidden.conllu", str(roots[0] / "ewt.conllu"),
                "server:../outside/secret.conllu"):
        with pytest.raises(ValueError, match="There is no treebank .* on the server; choose one of: bundled, "):
            treebank_path(key, roots)


def test_no_folder_offers_only_the_bundled_sample(tmp_path: Path) -> None:
    assert server_treebanks((tmp_path / "missing",)) == {}
    with pytest.raises(ValueError, match=r"choose one of: bundled \(put \.conllu files in EXPLORER_CORPUS_DIRS\)"):
        treebank_path("server:x.conllu", (tmp_path / "missing",))
