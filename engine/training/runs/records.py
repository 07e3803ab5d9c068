"""What a run writes to disk, read back with types: every field checked, damage named instead of raised.

A run folder is a place a person (or a crash, or a full disk) can change behind the app's back, so each
small file a run writes has a dataclass here whose ``parse`` returns either the typed value or a
``Damaged(reason)``: a short sentence saying what is wrong. Nothing here raises on bad content, so listing
runs, the model picker and the status views never fail because of one bad file; each caller decides what
damage means for it (listed with the reason, skipped with a warning, or refused with a message).

- ``CheckpointRecord``: a checkpoint's ``explorer_state.json`` (step, epoch, metrics, evaluation, time,
  training settings);
- ``MetricsLine``: one line of ``metrics.jsonl``;
- ``RunRecord``: ``run.json``, the job spec (the fields the listing and resume read before ``JobSpec``
  checks the rest).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from engine.checks import is_whole_number

MAX_REASON_CHARS = 120           # a value quoted in a reason is cut to this


@dataclass(frozen=True)
class Damaged:
    """What is wrong with a file, as one sentence fragment a person can read (``"epoch is 'x', not a whole
    number"``)."""

    reason: str


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _whole(record: Mapping[str, Any], name: str, default: int | None, low: int = 0) -> int | None | Damaged:
    """``record[name]`` as an int >= ``low`` (absent or null: ``default``), else ``Damaged``."""
    value = record.get(name)
    if value is None:
        return default
    if not is_whole_number(value) or value < low:
        return Damaged(f"{name} is {_shown(value)}, not a whole number of at least {low}")
    return int(value)


def _table(record: Mapping[str, Any], name: str) -> dict[str, Any] | None | Damaged:
    """``record[name]`` as a JSON object with text keys (absent or null: None), else ``Damaged``."""
    value = record.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        return Damaged(f"{name} is {type(value).__name__ if not isinstance(value, list) else 'a list'}, "
                       "not an object")
    return value


def _text(record: Mapping[str, Any], name: str) -> str | None | Damaged:
    value = record.get(name)
    if value is None or isinstance(value, str):
        return value
    return Damaged(f"{name} is {_shown(value)}, not text")


def _object(raw: str | bytes | Any) -> dict[str, Any] | Damaged:
    """A JSON object from text, UTF-8 bytes or an already parsed value; ``Damaged`` for anything else."""
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return Damaged("it is not UTF-8 text")
    if isinstance(raw, str):
        if not raw.strip():
            return Damaged("it is empty")
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return Damaged("it is not valid JSON")
    if not isinstance(raw, dict):
        return Damaged(f"it holds {type(raw).__name__ if not isinstance(raw, list) else 'a list'}, not a JSON "
                       "object")
    return raw


def _first_damage(*values: Any) -> Damaged | None:
    return next((v for v in values if isinstance(v, Damaged)), None)


@dataclass(frozen=True)
class CheckpointRecord:
    """A checkpoint's ``explorer_state.json``, checked (the step itself comes from the folder's name)."""

    step: int | None = None
    epoch: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)   # the last training record before the checkpoint
    eval_metrics: dict[str, Any] | None = None              # the evaluation at this step, if any
    created: float = 0.0                                    # time.time() when written; 0 when unknown
    config: dict[str, Any] | None = None                    # the TrainingConfig as a dict
    total_steps: int | None = None                          # ``config["total_steps"]``, checked

    @classmethod
    def parse(cls, raw: str | bytes | Any) -> CheckpointRecord | Damaged:
        """The record in ``raw`` (the file's text or bytes, or its parsed JSON), or what is wrong with it."""
        record = _object(raw)
        if isinstance(record, Damaged):
            return record
        step, epoch = _whole(record, "step", None), _whole(record, "epoch", 0)
        metrics, evaluation, config = _table(record, "metrics"), _table(record, "eval_metrics"), \
            _table(record, "config")
        created = record.get("created", 0.0)
        if created is None:
            created = 0.0
        if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created) \
                or created < 0:
            created = Damaged(f"created is {_shown(created)}, not a time")
        total = _whole(config, "total_steps", None, low=1) if isinstance(config, dict) else None
        damage = _first_damage(step, epoch, metrics, evaluation, config, created, total)
        if damage is not None:
            return damage
        return cls(step, epoch, metrics or {}, evaluation, float(created), config, total)

    @property
    def ends_lean(self) -> bool:
        """The last checkpoint of a finished run that kept only the model (``keep_optimizer_state="while-running"``,
        a fine-tune's default): it loads and starts new fine-tunes, but its run cannot continue."""
        lean = isinstance(self.config, dict) and self.config.get("keep_optimizer_state") == "while-running"
        return lean and self.step is not None and self.total_steps is not None and self.step >= self.total_steps


@dataclass(frozen=True)
class MetricsLine:
    """One record of ``metrics.jsonl``: a JSON object whose ``step`` (when present) is a whole number and
    whose ``kind`` (when present) is text."""

    record: dict[str, Any]
    step: int

    @classmethod
    def parse(cls, raw: str | bytes) -> MetricsLine | Damaged:
        """The record on one line (text or bytes), or what is wrong with it."""
        record = _object(raw)
        if isinstance(record, Damaged):
            return record
        step, kind = _whole(record, "step", 0), _text(record, "kind")
        damage = _first_damage(step, kind)
        if damage is not None:
            return damage
        if "step" in record:
            record = {**record, "step": step}          # 3.0 -> 3: every reader gets an int
        return cls(record, step)


@dataclass(frozen=True)
class RunRecord:
    """``run.json`` (the job spec's record), with the fields read before ``JobSpec`` checks the rest."""

    record: dict[str, Any]
    task: str | None = None
    corpus: str | None = None            # the label a person gave the text, else its file or name
    corpus_file: str | None = None       # the run's own copy of given text, relative to the run folder

    @classmethod
    def parse(cls, raw: str | bytes | Any) -> RunRecord | Damaged:
        """The record in ``raw`` (the file's text or bytes, or its parsed JSON), or what is wrong with it."""
        record = _object(raw)
        if isinstance(record, Damaged):
            return record
        task, label, corpus, corpus_file = (_text(record, name) for name in
                                            ("task", "corpus_label", "corpus", "corpus_file"))
        damage = _first_damage(task, label, corpus, corpus_file)
        if damage is not None:
            return damage
        return cls(record, task, label or corpus, corpus_file)
