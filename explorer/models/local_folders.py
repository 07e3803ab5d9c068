"""Local model folders: confined to the allowed folders, and named to clients without their server path.

A folder loaded from disk gets the key ``local:<root>/<folder>``: the name of the allowed folder it lies in
and its path inside that folder (``local:models/mine`` for ``/srv/data/models/mine``). That key is what the
picker lists, what every client is sent and what a probe's "model:" line names, so a public app does not
show its server's directory layout; the absolute path stays on the server (``ModelRegistry`` maps the key
back: ``LocalFolders``). No Gradio here.
"""
from __future__ import annotations

import threading
from pathlib import Path

from engine.folder_listing import configured_folder, links_leaving
from explorer.models.keys import ModelKey


def is_dir(path: Path) -> bool:
    """``path.is_dir()``, False where the name itself is unusable (too long for the file system, ...)."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def display(path: Path) -> str:
    """A server folder as a message may name it: relative to the working directory when inside it, else
    just its name (where the server keeps its files is not the user's business)."""
    try:
        return str(path.relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return path.name or str(path)


def _inside(path: Path, roots: tuple[Path, ...]) -> Path | None:
    """The first of ``roots`` that holds (or is) ``path``; None when none does."""
    return next((root for root in roots if path == root or root in path.parents), None)


def allowed_local(text: str, roots: tuple[Path, ...]) -> Path:
    """The resolved folder ``text`` names, when it lies inside one of ``roots`` (resolved) and no file in it
    links outside them. ValueError when outside, FileNotFoundError when there is no such folder (or its name
    is a symlink loop). A loop, a dangling link or a pipe inside the folder leads nowhere: not refused here
    (``engine.folder_listing``), and every reader refuses what is not a regular file."""
    try:
        path = Path(text).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):      # a symlink loop (RuntimeError on Python 3.11)
        raise FileNotFoundError(f"There is no model folder at {text}.") from None
    if _inside(path, roots) is None:
        shown = ", ".join(display(r) for r in roots) or "none configured (set EXPLORER_MODEL_DIRS)"
        raise ValueError(f"Local models must be inside the allowed model folders: {shown}.")
    if not is_dir(path):
        raise FileNotFoundError(f"There is no model folder at {text}.")
    try:
        next(iter(path.iterdir()), None)             # can it be listed? (the entries are listed safely below)
    except OSError as exc:                           # unreadable: say so, naming the folder by its key only
        reason = (exc.strerror or type(exc).__name__).lower()
        raise ValueError(f"The model folder {short_key(path, roots)} cannot be read ({reason}).") from None
    leaving = links_leaving(path, roots)             # a file symlinked out of the allowed folders
    if leaving:
        raise ValueError(f"{leaving[0]} in {text} links outside the allowed model folders; "
                         "refusing to read it.")
    return path


def short_key(path: Path, roots: tuple[Path, ...]) -> ModelKey:
    """The key a client sees for the allowed folder ``path`` (resolved): ``local:<root name>/<inside>``."""
    root = _inside(path, roots)
    if root is None:                                 # allowed_local checked it; never shown otherwise
        return ModelKey.local(path.name)
    inside = path.relative_to(root).as_posix()
    return ModelKey.local((root.name or "root") + ("" if inside == "." else f"/{inside}"))


class LocalFolders:
    """The folders local models may be loaded from (the allowed ones and the runs folder), and the short key
    of each model folder named so far (two allowed folders with the same name get ``~2``, ``~3``, ...)."""

    def __init__(self, allowed: tuple[Path, ...], runs_root: Path | None) -> None:
        self.allowed = allowed                       # resolved
        self.runs_root = runs_root
        self._named: dict[ModelKey, Path] = {}       # short key -> server folder
        self._lock = threading.Lock()

    @property
    def roots(self) -> tuple[Path, ...]:
        """The allowed folders and the runs folder, resolved."""
        return self.allowed + ((configured_folder(self.runs_root),) if self.runs_root is not None else ())

    def holds(self, text: str) -> bool:
        """Whether ``text`` is a folder inside the allowed folders (one elsewhere reads as a hub id: no oracle)."""
        try:
            path = Path(text).expanduser().resolve()
        except (OSError, ValueError, RuntimeError):
            return False
        return _inside(path, self.roots) is not None and is_dir(path)

    def short(self, key: ModelKey) -> ModelKey:
        """The key clients are sent for the local ``key`` (a short key or a server path): ``local:<root>/<inside>``.
        Errors as ``allowed_local``."""
        if key in self._named:
            return key
        path = allowed_local(key.reference, self.roots)
        with self._lock:
            base = name = short_key(path, self.roots)
            count = 1
            while self._named.setdefault(name, path) != path:    # two allowed folders with the same name
                count += 1
                name = ModelKey.local(f"{base.reference}~{count}")
        return name

    def folder(self, key: ModelKey) -> Path:
        """The folder of the local ``key`` (a short key named before, or a server path), checked again."""
        return allowed_local(str(self._named.get(key, key.reference)), self.roots)
