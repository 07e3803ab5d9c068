"""A run's job spec on disk: ``run.json``, written when the job starts and read back by a resume, the run list and
the model notes, and the copy of the text the job was given (``corpus.txt`` / ``corpus.jsonl``), which ``run.json``
names so that a resume reads exactly the same text.

``run.json`` is ``JobSpec.to_record`` as plain JSON (``engine.training.tasks.job_spec``); a run written before it
has ``run_spec.json`` (``legacy.LEGACY_SPEC_FILE``), read when ``run.json`` is missing or no good. Reading never
raises: ``spec_record`` is a ``RunRecord``, a ``Damaged`` naming the file (``engine.training.runs.records``), or None.
Where the files are is ``RunFolder``'s (``spec_path``, ``legacy_spec_path``, ``corpus_path``).
"""
from __future__ import annotations

import json
import os
from typing import Any

from engine.checkpoints.hf_format import work_tag
from engine.disk_faults import make_folder, writing
from engine.regular_files import read_bytes, reason
from engine.training.runs.records import Damaged, RunRecord
from engine.training.runs.run_folder import CORPUS_FILES, RunFolder

MAX_SPEC_BYTES = 4 << 20


def write_spec(run: RunFolder, record: dict[str, Any]) -> None:
    """Write the run's ``run.json`` (the job spec as plain JSON); a disk fault is a ``DiskFault``."""
    with writing(make_folder(run.root), f"writing {run.spec_path.name}"):
        run.spec_path.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")


def read_spec(run: RunFolder) -> dict[str, Any]:
    """The run's spec record ({} when it has none, or only a damaged one: ``spec_record`` says which)."""
    record = spec_record(run)
    return record.record if isinstance(record, RunRecord) else {}


def spec_record(run: RunFolder) -> RunRecord | Damaged | None:
    """The run's ``run.json`` checked (``RunRecord.parse``; a run written before it had ``run_spec.json``): None
    when the run has neither, ``Damaged`` (naming the file) when it cannot be read or holds a wrong value (and the
    older file is no good either)."""
    damage: Damaged | None = None
    for path in (run.spec_path, run.legacy_spec_path):
        try:
            parsed = RunRecord.parse(read_bytes(path, MAX_SPEC_BYTES))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:  # unreadable, a pipe or device, or far too large
            parsed = Damaged(f"it cannot be read ({reason(exc)})")
        if isinstance(parsed, RunRecord):
            return parsed
        damage = damage or Damaged(f"{path.name}: {parsed.reason}")
    return damage


def write_corpus(run: RunFolder, text: str, fmt: str) -> str:
    """Keep ``text`` (format ``txt`` or ``jsonl``) as the run's copy, written atomically as UTF-8 bytes exactly as
    given; the file name to record in ``run.json`` (relative to the run folder)."""
    name = CORPUS_FILES[fmt]
    staging = make_folder(run.root) / f".{name}.tmp-{work_tag()}"
    with writing(run.root, f"writing {name}"), open(staging, "wb") as handle:
        handle.write(text.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, run.corpus_path(name))
    return name
