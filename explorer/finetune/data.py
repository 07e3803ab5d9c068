"""The Fine-tune tab's data: a bundled example or an upload, checked before a run starts.

An upload is refused with one sentence when it has the wrong ending, is empty, is over
``MAX_UPLOAD_MB``, is not UTF-8, or its task's reader finds it unusable (wrong columns, a label that
is not among the labels listed, no usable question). A good upload is copied, named by its content,
into ``<runs folder>/uploads/``: the run's ``run.json`` names that copy, so the run can be continued
after Gradio has deleted its own temporary file.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from explorer.finetune.tasks import BundledExample, DataCheck, FinetuneTask

SOURCES = [("Bundled example", "example"), ("Upload a file", "upload")]
MAX_UPLOAD_MB = 10
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1_000_000
UPLOADS_DIR = "uploads"          # under the runs folder (not a run: it has no checkpoints folder)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def parse_labels(text: str | None) -> tuple[str, ...]:
    """The labels a person listed, comma-separated ("positive, negative"); () when none."""
    return tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))


def upload_path(value: Any) -> Path | None:
    """The uploaded file's path, from what Gradio hands over (a path string, or a FileData-like dict)."""
    if isinstance(value, dict):
        value = value.get("path")
    if value is None or value == "":
        return None
    return Path(str(value))


def chosen_data(row: FinetuneTask, source: str, example: str | None, upload: Any, labels: tuple[str, ...],
                uploads_dir: Path) -> tuple[Path | None, str, DataCheck, BundledExample | None]:
    """(the file the job reads (None: data the engine builds from the example's ``JobSpec`` fields and
    settings), its name as shown, what its reader found, the bundled example chosen or None) for the chosen
    data; ValueError with what to do next when it cannot be used."""
    if source == "example":
        if not row.examples:
            raise ValueError(f"{row.label} has no bundled example; choose \"Upload a file\" and upload "
                             f"a {' or '.join(row.extensions)} file.")
        examples = {e.name: e for e in row.examples}
        name = example or row.examples[0].name
        if name not in examples:
            raise ValueError(f"There is no bundled example {name!r} for {row.name}; choose one of: "
                             f"{', '.join(examples)}.")
        chosen = examples[name]
        if chosen.path is None:
            assert row.check_builtin is not None, f"{row.name}: a built-in example needs check_builtin"
            return None, name, row.check_builtin({**chosen.fields, **chosen.settings}), chosen
        return chosen.path, name, row.read(chosen.path, labels), chosen
    if source != "upload":
        raise ValueError(f"unknown data source {source!r}; choose one of: {', '.join(v for _, v in SOURCES)}")
    path = upload_path(upload)
    if path is None:
        raise ValueError(f"Upload a {' or '.join(row.extensions)} file first, or choose the bundled example.")
    name = path.name
    if path.suffix.lower() not in row.extensions:
        kind = f"a {path.suffix} file" if path.suffix else "a file without an ending"
        raise ValueError(f"{name} is {kind}; {row.name} takes {' or '.join(row.extensions)} files.")
    raw = _read_upload(path, name)
    try:
        check = row.read(path, labels)
    except ValueError as exc:
        raise ValueError(str(exc).replace(str(path), name)) from None
    return keep_upload(raw, name, uploads_dir), name, check, None


def _read_upload(path: Path, name: str) -> bytes:
    """The upload's bytes, refused when missing, too large, empty or not UTF-8."""
    try:
        size = path.stat().st_size
    except OSError:
        raise ValueError(f"{name} did not arrive (the upload is gone); upload it again.") from None
    if size > MAX_UPLOAD_BYTES:
        raise ValueError(f"{name} is {size / 1e6:,.1f} MB; the limit is {MAX_UPLOAD_MB} MB. Upload a smaller file "
                         "(fewer examples).")
    raw = path.read_bytes()
    if not raw.strip():
        raise ValueError(f"{name} is empty; upload a file with examples in it.")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not UTF-8 text (the byte at position {exc.start:,} is not UTF-8); save it "
                         "as UTF-8 and upload it again.") from None
    return raw


def keep_upload(raw: bytes, name: str, uploads_dir: Path) -> Path:
    """A copy of the upload under ``uploads_dir``, named by its content (the same file is kept once)."""
    stem = _UNSAFE.sub("_", Path(name).stem)[:40] or "data"
    target = uploads_dir / f"{stem}-{hashlib.sha256(raw).hexdigest()[:16]}{Path(name).suffix.lower()}"
    if target.is_file() and target.stat().st_size == len(raw):
        return target
    uploads_dir.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(dir=uploads_dir, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
        os.replace(staging, target)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return target
