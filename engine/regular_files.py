"""Every file the engine reads is untrusted: it must be a regular file, it is opened without blocking and read
with a size cap.

A named pipe opened for reading blocks until a writer appears, and ``/dev/zero`` never ends; a symlink can
point at either. ``open_regular`` opens with ``O_NONBLOCK`` (a pipe opens at once instead of hanging), then
checks with ``fstat`` on the open descriptor (no race with a rename) that it is a regular file, and clears the
non-blocking flag again for ordinary reads. ``read_bytes`` and ``read_text`` stop at ``limit`` bytes.
``NotRegularFile`` and ``TooLarge`` are ``ValueError``s whose message names the file.
"""
from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO


class NotRegularFile(ValueError):
    """The path is a pipe, a device, a socket, a folder or a symlink that was not to be followed."""


class TooLarge(ValueError):
    """The file holds more bytes than its reader accepts."""


def open_regular(path: str | Path, follow_symlinks: bool = True) -> BinaryIO:
    """``path`` opened for binary reading, or ``NotRegularFile`` / ``FileNotFoundError`` / ``PermissionError``.
    ``follow_symlinks=False`` refuses a symlink itself (``O_NOFOLLOW``)."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (getattr(os, "ELOOP", -1), getattr(os, "ENXIO", -1)):   # O_NOFOLLOW on a link; a socket
            raise NotRegularFile(f"{path.name} is not a regular file") from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path.name} is not a regular file ({_kind(mode)})")
        fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bytes(path: str | Path, limit: int, follow_symlinks: bool = True) -> bytes:
    """The whole file, which must be a regular file of at most ``limit`` bytes (``TooLarge`` otherwise)."""
    with open_regular(path, follow_symlinks) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{Path(path).name} is larger than {limit:,} bytes")
    return data


def read_text(path: str | Path, limit: int, follow_symlinks: bool = True) -> str:
    """``read_bytes`` decoded as UTF-8 (``ValueError`` naming the file when it is not)."""
    data = read_bytes(path, limit, follow_symlinks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{Path(path).name} is not UTF-8 text (byte {exc.start})") from None


def require_regular(path: str | Path) -> Path:
    """``path`` when it is a regular file (its target, for a symlink), before a library opens it itself;
    ``FileNotFoundError`` when missing, ``NotRegularFile`` otherwise. Never opens it (a pipe cannot block)."""
    path = Path(path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"{path.name} is not a regular file ({_kind(mode)})")
    return path


def reason(exc: Exception) -> str:
    """Why a read failed, in a few words and without a path: the OS's reason, or this module's sentence."""
    if isinstance(exc, (NotRegularFile, TooLarge)):
        return str(exc)
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__


def is_regular(path: str | Path) -> bool:
    """Whether ``path`` (its target, for a symlink) is a regular file; never opens it, never raises."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a plain file"
