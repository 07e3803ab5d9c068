"""File-system questions about a run folder that never raise: a run folder is a place a person, a crash or
a full disk can change (or lock) behind the app's back, so where the server cannot look the answer is False,
and why a call failed is said in a few words, never with a path."""
from __future__ import annotations

from pathlib import Path

from engine.checkpoints.weight_files import read_weights
from engine.regular_files import reason


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


def weights_problem(checkpoint: Path) -> str | None:
    """Why the checkpoint's weights cannot load (a header that does not cover the file: truncated, damaged, a
    special file), or None; reads the headers only."""
    try:
        read_weights(checkpoint, meta=True)
    except (OSError, ValueError) as exc:
        return f"its weights cannot be read ({reason(exc)})"
    return None
