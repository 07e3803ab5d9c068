"""Corpora kept on the server: the files and folders in the allowed corpus folders, offered by the Training
tab beside the built-in corpus, named to clients by a short key, never by their server path.

``EXPLORER_CORPUS_DIRS`` (``os.pathsep``-separated, default ``corpora``) names the folders. Each file
(``.txt``, ``.md``, ``.jsonl``, ``.parquet``, ``.arrow``) or folder directly inside one is a corpus with
the key ``server:<name>`` (the first root wins a name). A corpus of any size trains, as on the command line:
it is tokenised once into the token cache (``engine.data.token_cache``) and read memory-mapped after. A
symlink that leads outside its folder is not offered, and a folder holding one at any depth is refused when a
run would read it; a symlink loop, a dangling link, an unreadable entry or a named pipe is skipped
(``engine.folder_listing``). No Gradio here.
"""
from __future__ import annotations

import os
from pathlib import Path

from engine.data.corpus_sources import FILE_SUFFIXES
from engine.folder_listing import configured_folder, list_entries

CORPUS_DIRS_ENV = "EXPLORER_CORPUS_DIRS"
DEFAULT_CORPUS_DIRS = ("corpora",)
PREFIX = "server:"


def corpus_roots() -> tuple[Path, ...]:
    """The allowed corpus folders (resolved): ``$EXPLORER_CORPUS_DIRS`` or ``corpora``."""
    raw = os.environ.get(CORPUS_DIRS_ENV)
    names = [p for p in raw.split(os.pathsep) if p.strip()] if raw else list(DEFAULT_CORPUS_DIRS)
    return tuple(configured_folder(p) for p in names)


def server_corpora(roots: tuple[Path, ...] | None = None) -> dict[str, Path]:
    """``server:<name>`` -> the corpus's path, for every file or folder in the allowed folders (listed by
    ``engine.folder_listing``: a loop, a dangling link, a pipe or an unreadable entry is skipped, never raised)."""
    found: dict[str, Path] = {}
    for root in corpus_roots() if roots is None else roots:
        for entry in list_entries(root, folders=True, suffixes=FILE_SUFFIXES):
            if entry.is_dir or entry.target.suffix.lower() in FILE_SUFFIXES:     # a file is read by its target's kind
                found.setdefault(PREFIX + entry.name, entry.target)
    return found


def server_corpus_path(key: str, roots: tuple[Path, ...] | None = None) -> Path:
    """The path of the server corpus ``key`` names; ValueError when it is not one of them (now), or when a
    folder holds a symlink, at any depth, that leads outside the allowed folders (it would be read too)."""
    roots = corpus_roots() if roots is None else roots
    corpora = server_corpora(roots)
    if key not in corpora:
        offered = ", ".join(corpora) or f"none (put files or folders in {CORPUS_DIRS_ENV})"
        raise ValueError(f"There is no server corpus {key!r}; the server offers: {offered}.")
    leaving = _link_leaving(corpora[key], roots)
    if leaving is not None:
        raise ValueError(f"The server corpus {key!r} holds a link that leads outside the corpus folders "
                         f"({leaving}); it is not used. Ask the admin to remove the link.")
    return corpora[key]


def _link_leaving(folder: Path, roots: tuple[Path, ...]) -> str | None:
    """The name (inside ``folder``) of the first symlink whose target is outside every root, else None."""
    if not folder.is_dir():
        return None
    for parent, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(parent) / name
            if path.is_symlink():
                target = Path(os.path.realpath(path))
                if not any(root == target or root in target.parents for root in roots):
                    return path.relative_to(folder).as_posix()
    return None
