"""Treebanks kept on the server: the CoNLL-U files in the allowed corpus folders, offered by the Syntax tab
beside the bundled sample and an upload, named to clients by a short key, never by their server path.

The folders are the Training tab's (``EXPLORER_CORPUS_DIRS``, default ``corpora``:
``explorer.server_corpora.corpus_roots``). Each ``.conllu`` / ``.conll`` file directly inside one is a
treebank with the key ``server:<file name>`` (the first folder wins a name); a hidden file, or a symlink that
leads outside its folder, is not offered; a symlink loop, a dangling link, an unreadable entry or a named pipe is
skipped (``engine.folder_listing``). The list is read again at every request, so a file added
after start is offered at once. No Gradio here.
"""
from __future__ import annotations

from pathlib import Path

from engine.folder_listing import list_entries
from explorer.server_corpora import CORPUS_DIRS_ENV, PREFIX, corpus_roots

BUNDLED = "bundled"                          # the key of the bundled UD sample
BUNDLED_LABEL = "the bundled sample (UD English EWT)"
SUFFIXES = (".conllu", ".conll")


def server_treebanks(roots: tuple[Path, ...] | None = None) -> dict[str, Path]:
    """``server:<name>`` -> the file's resolved path, for every CoNLL-U file in the allowed folders (listed by
    ``engine.folder_listing``: a loop, a dangling link, a pipe or an unreadable entry is skipped, never raised)."""
    found: dict[str, Path] = {}
    for root in corpus_roots() if roots is None else roots:
        for entry in list_entries(root, suffixes=SUFFIXES):
            found.setdefault(PREFIX + entry.name, entry.target)
    return found


def treebank_choices(roots: tuple[Path, ...] | None = None) -> list[tuple[str, str]]:
    """(label, key) for the dropdown: the bundled sample first, then the server's treebanks."""
    return [(BUNDLED_LABEL, BUNDLED)] + [(key, key) for key in server_treebanks(roots)]


def treebank_path(key: str | None, roots: tuple[Path, ...] | None = None) -> Path | None:
    """The file the key names, None for the bundled sample (or no key); ValueError naming the keys on offer when
    it is not one of them now (a server path is never a key)."""
    key = (key or "").strip()
    if key in ("", BUNDLED):
        return None
    offered = server_treebanks(roots)
    if key not in offered:
        listed = ", ".join([BUNDLED, *offered]) if offered else f"{BUNDLED} (put .conllu files in {CORPUS_DIRS_ENV})"
        raise ValueError(f"There is no treebank {key[:80]!r} on the server; choose one of: {listed}.")
    return offered[key]
