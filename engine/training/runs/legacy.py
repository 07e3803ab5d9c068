"""Older run layouts, in one place: the files and fields runs written by earlier versions hold where today's
hold something else, and how each is told apart. Their readers (``spec_file.spec_record``,
``state.read_checkpoint_info`` / ``read_checkpoint_record``, ``JobSpec.from_record``) read today's name first
and fall back to these; nothing writes them any more.

- ``run_spec.json``: the app's worker's spec file from before the job spec existed; read when a run has no
  (good) ``run.json``.
- ``trainer_state.json``: a checkpoint's small record before it was renamed ``explorer_state.json`` (the name
  misled: it is the Hugging Face Trainer's state file, whose schema ours is not). The same record under its
  old name is read; a Hugging Face Trainer's own file of that name (it has ``global_step``) is not ours.
- ``tokenizer_dir``: the worker's older spec field for what is now ``tokenizer``.
- The built-in tasks' own fields, flat in the spec (``doc_stride``, ``max_question_len``, ``num_choices``,
  ``mlm_corpus``, ``mlm_seq_len``, ``mlm_batch_size``; every run had all six, whatever its task): now the
  task's settings (``task_settings``): the ones its task has join them (a value of None: the setting's
  default), and the others are dropped.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

LEGACY_SPEC_FILE = "run_spec.json"          # written by the app's worker before the job spec existed
LEGACY_INFO_FILE = "trainer_state.json"     # a checkpoint's small record in runs written before the rename
# the built-in tasks' own fields, flat in records written before a task owned its settings
FLAT_TASK_FIELDS = ("doc_stride", "max_question_len", "num_choices", "mlm_corpus", "mlm_seq_len", "mlm_batch_size")


def is_ours(record: Any) -> bool:
    """Whether a parsed checkpoint record is ours: a JSON object that is not a Hugging Face Trainer's state
    (``global_step`` is the Trainer's field)."""
    return isinstance(record, dict) and "global_step" not in record


def is_hf_trainer_state(raw: bytes) -> bool:
    """Whether the bytes of a ``trainer_state.json`` are a Hugging Face Trainer's state, not our old record."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and "global_step" in record


def upgrade_spec_values(record: Mapping[str, Any], values: dict[str, Any],
                        setting_names: Sequence[str] = ()) -> dict[str, Any]:
    """``values`` (the ``JobSpec`` fields of a spec record) with the older spec file's ``tokenizer_dir`` taken
    as ``tokenizer`` when the record has no ``tokenizer`` of its own, and an older record's flat task fields
    (``FLAT_TASK_FIELDS``) that are among its task's ``setting_names`` taken as ``task_settings``."""
    if "tokenizer_dir" in record and "tokenizer" not in values:
        values = {**values, "tokenizer": record["tokenizer_dir"]}
    given = values.get("task_settings")
    flat = {name: record[name] for name in FLAT_TASK_FIELDS if name in setting_names
            and record.get(name) is not None and not (isinstance(given, dict) and name in given)}
    if flat and (given is None or isinstance(given, dict)):
        values = {**values, "task_settings": {**(given or {}), **flat}}
    return values
