"""Reading a fine-tuning data file as text, with messages a person can act on.

Every task's reader starts here: the file must exist, be under the upload cap (when one is
given: the app passes its own, the command line none), not be empty, and be UTF-8 text (a
BOM is allowed). Each ``ValueError`` names the file, the line where it can, what is wrong and
what to do about it.
"""
from __future__ import annotations

import contextlib
import csv
import io
import threading
from collections.abc import Iterator
from pathlib import Path

_FIELD_LIMIT = threading.Lock()    # csv.field_size_limit is one setting for the whole process


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


def csv_reader(text: str, path: str | Path) -> csv.DictReader:
    """A ``csv.DictReader`` over ``text`` (tab-separated for a ``.tsv``) that reads a field as long as the whole
    text: the ``csv`` module's field limit (131,072 characters by default; one setting for the whole process)
    is raised to ``len(text)``, never lowered, so a file under the upload cap is read whole. Parse it inside
    :func:`csv_errors`."""
    with _FIELD_LIMIT:
        if csv.field_size_limit() <= len(text):
            csv.field_size_limit(len(text) + 1)
    delimiter = "\t" if Path(path).suffix.lower() == ".tsv" else ","
    return csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)


@contextlib.contextmanager
def csv_errors(path: str | Path, reader: csv.DictReader) -> Iterator[None]:
    """Turn the ``csv`` module's ``csv.Error`` while reading ``reader`` into a ``ValueError`` naming the file
    and the line ("data.csv, line 3: the file is not valid CSV (unexpected end of data); ...")."""
    try:
        yield
    except csv.Error as exc:
        line = reader.reader.line_num               # the DictReader's own line_num is the last good row's
        raise ValueError(f"{Path(path).name}, line {max(line, 1)}: the file is not valid CSV ({exc}); "
                         "check the quotes and separators on that line") from None


def shown_columns(columns: list[str], most: int = 12, width: int = 40) -> str:
    """A header's column names for a message: at most ``most`` of them, each cut to ``width`` characters (a
    file whose "header" is one 9 MB field must not come back as a 9 MB message); "no header" for none."""
    names = [name if len(name) <= width else name[:width - 1] + "…" for name in columns[:most]]
    more = f" and {len(columns) - most} more" if len(columns) > most else ""
    return ", ".join(names) + more if names else "no header"
