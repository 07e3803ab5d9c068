"""File-system questions about a run folder that never raise: a run folder is a place a person, a crash or
a full disk can change (or lock) behind the app's back, so where the server cannot look the answer is False,
and why a call failed is said in a few words, never with a path."""
from __future__ import annotations

from pathlib import Path


def is_file(path: Path) -> bool:
    """``path.is_file()``, False where the server cannot look."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """``path.is_dir()``, False where the server cannot look."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def why(exc: Exception) -> str:
    """Why a file system call failed, in a few words (``Permission denied``), never a path."""
    return (exc.strerror if isinstance(exc, OSError) else None) or type(exc).__name__
