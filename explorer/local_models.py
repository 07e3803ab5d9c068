"""Local model folders: confined to the allowed folders, and named to clients without their server path.

A folder loaded from disk gets the key ``local:<root>/<folder>``: the name of the allowed folder it lies in
and its path inside that folder (``local:models/mine`` for ``/srv/data/models/mine``). That key is what the
picker lists, what every client is sent and what a probe's "model:" line names, so a public app does not
show its server's directory layout; the absolute path stays on the server (``ModelRegistry`` maps the key
back). No Gradio here.
"""
from __future__ import annotations

from pathlib import Path


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
    links outside them. ValueError when outside, FileNotFoundError when there is no such folder."""
    path = Path(text).expanduser().resolve()
    if _inside(path, roots) is None:
        shown = ", ".join(display(r) for r in roots) or "none configured (set EXPLORER_MODEL_DIRS)"
        raise ValueError(f"Local models must be inside the allowed model folders: {shown}.")
    if not is_dir(path):
        raise FileNotFoundError(f"There is no model folder at {text}.")
    try:
        items = list(path.iterdir())
    except OSError as exc:                           # unreadable: say so, naming the folder by its key only
        reason = (exc.strerror or type(exc).__name__).lower()
        raise ValueError(f"The model folder {short_key(path, roots)} cannot be read ({reason}).") from None
    for item in items:                               # a file symlinked out of the allowed folders
        if item.is_symlink() and _inside(item.resolve(), roots) is None:
            raise ValueError(f"{item.name} in {text} links outside the allowed model folders; "
                             "refusing to read it.")
    return path


def short_key(path: Path, roots: tuple[Path, ...]) -> str:
    """The key a client sees for the allowed folder ``path`` (resolved): ``local:<root name>/<inside>``."""
    root = _inside(path, roots)
    if root is None:                                 # allowed_local checked it; never shown otherwise
        return f"local:{path.name}"
    inside = path.relative_to(root).as_posix()
    return f"local:{root.name or 'root'}" + ("" if inside == "." else f"/{inside}")
