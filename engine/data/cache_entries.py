"""One bad entry of the token cache never blocks a corpus: it is set aside, said so by name, and made again.

An entry is anything the cache keeps under its folder: a store folder ``corpora/<key>/`` (and its four files), a
vocabulary folder ``vocabularies/<key>/``, a count ``counts/<key>.json``, or one of those three subfolders.
``read_entry`` reads one with the caller's reader; an entry that is not what the cache writes (a folder where a
file belongs or the other way round, a pipe, a symlink, unreadable, invalid JSON, wrong types or values, files
of the wrong size) is *set aside*: renamed next to itself to ``<name>.damaged-<time>``, with a note
``<name>.damaged-<time>.txt`` saying what was wrong, and a warning naming the entry relative to the cache and
the fault. The caller then writes a fresh entry. Only the newest set-aside copy of an entry is kept (older ones
are removed), so an entry damaged again and again costs at most one copy. When the entry cannot be renamed, the
warning says so and the caller works without the cache for that corpus this time. Only the cache folder itself
being unwritable is a folder-level error (``token_cache.CacheUnwritable``).
"""
from __future__ import annotations

import contextlib
import datetime
import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterable, TypeVar

PARTIAL = ".partial-"           # <key>.partial-<pid>-<tag>: a store or vocabulary being written
DAMAGED = ".damaged-"           # <name>.damaged-<time>: an entry set aside, with <name>.damaged-<time>.txt
logger = logging.getLogger(__name__)
T = TypeVar("T")

_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFREG: "a file", stat.S_IFIFO: "a named pipe", stat.S_IFLNK: "a symlink",
          stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


class DamagedEntry(ValueError):
    """A cache entry that is not what the cache writes; the message says what is wrong with it."""


def present(path: Path, kind: str, follow_link: bool = False) -> bool:
    """Whether ``path`` is there as a ``kind`` ("file" or "folder"); False when absent (or its parent is not a
    folder: the cache folder's own problem, met when writing). ``DamagedEntry`` when it is something else, a
    symlink included unless ``follow_link`` (then its target must be a ``kind``)."""
    try:
        mode = (os.stat if follow_link else os.lstat)(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        if path.is_symlink():
            raise DamagedEntry("it is a symlink to nothing") from None
        return False
    wanted = stat.S_IFDIR if kind == "folder" else stat.S_IFREG
    if stat.S_IFMT(mode) != wanted:
        raise DamagedEntry(f"it is {_KINDS.get(stat.S_IFMT(mode), 'something else')}, not {_KINDS[wanted]}")
    return True


def regular_files(folder: Path, names: Iterable[str]) -> None:
    """``DamagedEntry`` unless each named file in ``folder`` is a regular file (never a symlink)."""
    for name in names:
        try:
            if not present(folder / name, "file"):
                raise DamagedEntry("it is missing (never finished)")
        except DamagedEntry as exc:
            raise DamagedEntry(f"{name}: {exc}") from None


def read_entry(entry: Path, cache: Path, kind: str, read: Callable[[Path], T], again: str) -> tuple[T | None, bool]:
    """``(read(entry), True)`` for a sound entry; ``(None, True)`` when it is absent or was set aside (write a fresh
    one); ``(None, False)`` when it is damaged and could not be set aside (work without the cache). ``again`` ends
    the warning ("tokenising the corpus again (corpus.txt)")."""
    try:
        if not present(entry, kind):
            return None, True
    except DamagedEntry as exc:
        return None, set_aside(entry, cache, str(exc), again)
    except OSError:                          # its folder cannot be looked into: writing says so, for the folder
        return None, True
    try:
        return read(entry), True
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return None, set_aside(entry, cache, _why(exc).replace(f"{entry}{os.sep}", ""), again)


def usable_folder(cache: Path, name: str) -> Path | None:
    """``cache/name``, set aside first when it is not a folder (a symlink to a folder is accepted); None when it
    is in the way and cannot be set aside."""
    folder = cache / name
    try:
        present(folder, "folder", follow_link=True)
    except DamagedEntry as exc:
        if not set_aside(folder, cache, str(exc), "making it again"):
            return None
    except OSError:                          # the cache folder cannot be looked into: writing says so
        pass
    return folder


def set_aside(entry: Path, cache: Path, why: str, again: str) -> bool:
    """Rename a damaged entry to ``<name>.damaged-<time>`` with a note, warn naming it; False (warned too) when it
    cannot be renamed. An entry gone meanwhile (another process set it aside) counts as set aside."""
    name = _relative(entry, cache)
    target = entry.with_name(f"{entry.name}{DAMAGED}{datetime.datetime.now():%Y%m%d-%H%M%S-%f}")
    try:
        os.rename(entry, target)
    except FileNotFoundError:
        return True
    except OSError as exc:
        logger.warning("the token cache entry %s is damaged (%s) and cannot be set aside (%s); %s, without the "
                       "cache this time", name, why, exc.strerror or exc, again)
        return False
    try:
        target.with_name(f"{target.name}.txt").write_text(
            f"{name} was set aside on {datetime.datetime.now():%Y-%m-%d %H:%M:%S}: {why}\n", encoding="utf-8")
    except OSError:
        pass                                 # the warning below says it all the same
    _drop_older(entry, target)
    logger.warning("the token cache entry %s is damaged (%s); set aside as %s, %s", name, why,
                   _relative(target, cache), again)
    return True


def sweep_dead_partials(parent: Path) -> list[Path]:
    """Remove the ``<key>.partial-<pid>-<tag>`` folders of writers that are no longer running on this machine
    (a ``kill -9`` during a build leaves one); returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return removed
    for entry in entries:
        name, _, rest = entry.name.partition(PARTIAL)
        pid = rest.split("-", 1)[0]
        if name and pid.isdigit() and not _alive(int(pid)):
            remove_entry(entry)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process of this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                          # it exists but belongs to someone else
        return True
    return True


def remove_entry(path: Path) -> None:
    """A folder, file, pipe or link removed, whatever it is; nothing when it is gone."""
    try:
        is_folder = stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return
    if is_folder:
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):    # clean-up that may race another process
            path.unlink()


def _drop_older(entry: Path, kept: Path) -> None:
    """Remove earlier set-aside copies of ``entry`` (and their notes), keeping ``kept``."""
    prefix = f"{entry.name}{DAMAGED}"
    with contextlib.suppress(OSError):    # clean-up that may race another process
        for sibling in entry.parent.iterdir():
            if sibling.name.startswith(prefix) and not sibling.name.startswith(kept.name):
                remove_entry(sibling)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"it cannot be read: {exc.strerror or exc}"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to read"
    return str(exc) or type(exc).__name__


def _relative(path: Path, cache: Path) -> str:
    try:
        return path.relative_to(cache).as_posix()
    except ValueError:
        return str(path)
