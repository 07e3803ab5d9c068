"""Listing a folder the app serves from (corpora, treebanks, model folders, runs): one bad entry never stops it.

A person, a crash or an attacker with write access can put anything into such a folder: a symlink loop
(``a.conllu -> b.conllu -> a.conllu``, or a link to itself), a link to nowhere, an entry the server may not
look at, a named pipe, a socket, a device, or a link that leads out of the folder. ``list_entries`` lists the
direct entries of one allowed folder by these rules, in this order:

1. the name first, before anything is resolved: hidden names (``.x``) are skipped, and a file must end with
   one of ``suffixes`` (a folder may have any name);
2. then the entry is resolved (every link followed); a loop, a dangling link, a permission error or an
   unusable name is skipped with one ``logging`` warning naming the entry and the reason (once per entry and
   reason in a process: a folder listed every second does not flood the log);
3. its target must stay inside the allowed folder (or inside one of ``within``): links never leave it;
4. and be of the wanted kind: a regular file (never a pipe, socket or device: those are skipped with a warning)
   or a folder.

Nothing raises for a bad entry; a folder that is missing or cannot be listed gives ``[]``. Nothing is opened,
so a pipe cannot block. ``links_leaving`` names the links in a folder that lead out of the allowed folders (a
model folder holding one is refused). No Gradio here.
"""
from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

_WARNED: set[tuple[str, str]] = set()     # (entry, reason) already warned about in this process
_MAX_WARNED = 4096


@dataclass(frozen=True)
class Entry:
    """One usable entry of a listed folder."""

    name: str          # its name in the folder: what a client may be shown (never the server path)
    path: Path         # folder / name, as listed (a symlink stays the symlink)
    target: Path       # where it leads: resolved, inside the allowed folder(s)
    is_dir: bool       # a folder; else a regular file


def list_entries(root: str | Path, *, files: bool = True, folders: bool = False, suffixes: tuple[str, ...] = (),
                 within: tuple[Path, ...] | None = None) -> list[Entry]:
    """The usable direct entries of ``root``, sorted by name (rules in the module docstring): regular files
    (``files``; with ``suffixes``, only names ending in one of them, case-insensitive) and folders
    (``folders``), whose targets lie inside ``root`` (or inside one of ``within``, resolved). Never raises."""
    folder = Path(root)
    allowed = within if within is not None else _resolved_roots(folder)
    found: list[Entry] = []
    for name in _names(folder):
        if name.startswith(".") or not (folders or _suffix_ok(name, suffixes)):
            continue
        entry = _checked(folder / name, allowed, files, folders, suffixes)
        if entry is not None:
            found.append(entry)
    return found


def links_leaving(folder: str | Path, within: tuple[Path, ...]) -> list[str]:
    """The names of the symlinks directly inside ``folder`` whose target lies outside every one of ``within``
    (resolved), sorted; a link to nowhere that would lead outside counts, a loop leads nowhere. Never raises."""
    leaving = []
    for name in _names(Path(folder)):
        path = Path(folder) / name
        try:
            if not os.path.islink(path):
                continue
            target = Path(os.path.realpath(path))       # not strict: a loop gives a path inside, never an error
        except (OSError, RuntimeError, ValueError) as exc:
            _warn(path, _why(exc, path))
            continue
        if not _inside(target, within):
            leaving.append(name)
    return leaving


def configured_folder(path: str | Path) -> Path:
    """A folder the operator configured (a models, corpus or runs folder), resolved; when it cannot be (a symlink
    loop, a name the file system refuses) made absolute instead, never raising: it then holds nothing, since
    :func:`list_entries` finds nothing inside a folder it cannot resolve."""
    folder = Path(path).expanduser()
    try:
        return folder.resolve()
    except (OSError, RuntimeError, ValueError):           # RuntimeError: a symlink loop on Python 3.11
        logger.warning("the configured folder %s cannot be resolved; it offers nothing", folder)
        return folder.absolute()


def _names(folder: Path) -> list[str]:
    """The names in ``folder``, sorted; [] when it is missing or cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entry.name for entry in entries)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        logger.warning("cannot list the folder %s: %s", folder.name or folder, _why(exc, folder))
        return []


def _resolved_roots(folder: Path) -> tuple[Path, ...]:
    try:
        return (Path(os.path.realpath(folder, strict=True)),)
    except (OSError, RuntimeError, ValueError):
        return ()                                        # nothing is inside a folder that cannot be resolved


def _checked(path: Path, allowed: tuple[Path, ...], files: bool, folders: bool,
             suffixes: tuple[str, ...]) -> Entry | None:
    """``path`` as an ``Entry`` when it resolves inside ``allowed`` to a wanted kind; else None (warned when it
    cannot be read, or is a special file)."""
    try:
        target = Path(os.path.realpath(path, strict=True))
        mode = os.stat(target).st_mode
    except (OSError, RuntimeError, ValueError) as exc:
        _warn(path, _why(exc, path))
        return None
    if not _inside(target, allowed):
        logger.debug("%s leads outside its folder; not listed", path.name)
        return None
    if stat.S_ISDIR(mode):
        return Entry(path.name, path, target, True) if folders else None
    if stat.S_ISREG(mode):
        return Entry(path.name, path, target, False) if files and _suffix_ok(path.name, suffixes) else None
    if files and _suffix_ok(path.name, suffixes):
        _warn(path, f"not a regular file ({_kind(mode)})")
    return None


def _inside(target: Path, roots: tuple[Path, ...]) -> bool:
    return any(target == root or root in target.parents for root in roots)


def _suffix_ok(name: str, suffixes: tuple[str, ...]) -> bool:
    return not suffixes or name.lower().endswith(tuple(s.lower() for s in suffixes))


def _why(exc: BaseException, path: Path) -> str:
    """A loop, a dangling link, or the OS's reason, in a few words."""
    if isinstance(exc, RuntimeError) or (isinstance(exc, OSError) and exc.errno == errno.ELOOP):
        return "a symlink loop"
    if isinstance(exc, FileNotFoundError) and os.path.lexists(path):
        return "a link to nothing (dangling)"
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a plain file"


def _warn(path: Path, reason: str) -> None:
    """One warning line per entry and reason in this process."""
    key = (str(path), reason)
    if key in _WARNED:
        logger.debug("%s skipped: %s", path.name, reason)
        return
    if len(_WARNED) >= _MAX_WARNED:
        _WARNED.clear()
    _WARNED.add(key)
    logger.warning("skipped %s in %s: %s", path.name, path.parent.name or path.parent, reason)
