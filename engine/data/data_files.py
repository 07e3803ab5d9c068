"""Reading a fine-tuning data file as text, with messages a person can act on.

Every task's reader starts here: the file must exist, be under the upload cap (when one is
given: the app passes its own, the command line none), not be empty, and be UTF-8 text (a
BOM is allowed). Each ``ValueError`` names the file, the line where it can, what is wrong and
what to do about it.
"""
from __future__ import annotations

from pathlib import Path


def read_data_text(path: str | Path, max_bytes: int | None = None, what: str = "data file") -> str:
    """The text of ``path``; ``FileNotFoundError`` when it is missing, ``ValueError`` when it is over
    ``max_bytes``, empty, binary or not UTF-8."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    check_size(path, max_bytes, what)
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise ValueError(f"{path.name}, line {line}: a NUL byte; this looks like a binary "
                         f"file, not a {what}. Save it as plain UTF-8 text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{path.name}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                         f"save the {what} as UTF-8") from None
    if not text.strip():
        raise ValueError(f"{path.name} is empty (only whitespace); it needs examples")
    return text


def check_size(path: str | Path, max_bytes: int | None, what: str = "data file") -> None:
    """``ValueError`` when the file is empty or larger than ``max_bytes`` (None: no cap)."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path.name} is empty; it needs examples")
    if max_bytes is not None and size > max_bytes:
        raise ValueError(f"{path.name} is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB limit for "
                         f"uploads; use fewer examples, or fine-tune on the command line (python -m engine.finetune)")
