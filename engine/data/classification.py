"""Sequence-classification data: CSV or JSONL files of ``text`` (+ optional ``text_pair``) and ``label``.

A CSV needs a header naming the columns ``text`` and ``label`` (``text_pair`` optional;
other columns are ignored); a ``.tsv`` is read tab-separated. A JSONL file holds one object
per line with the same keys. Labels may be names or integer ids; new ones become class ids in a
deterministic order (``engine.data.labels.label_names``): numerically when every label is an
integer, else alphabetically; ids of a model's existing named labels are read as those names
(``as_label_names``). The model's ``config.json`` keeps them as ``id2label`` / ``label2id``.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from engine.checks import is_int
from engine.data.data_files import csv_errors, csv_reader, read_data_text, shown_columns
from engine.data.features import FeatureDataset, second_text_start
from engine.data.labels import check_known
from engine.text.segment_ids import separated_once
from engine.text.tokenizer import WordPieceTokenizer


@dataclass
class ClassificationExample:
    """One text (or text pair) and its label as written in the file; ``line`` for messages."""

    text: str
    text_pair: str | None
    label: str
    line: int = 0


def read_classification_file(path: str | Path, max_bytes: int | None = None) -> list[ClassificationExample]:
    """Read a ``.csv``/``.tsv`` or ``.jsonl`` file (a file starting with ``{`` counts as JSONL).

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` (naming the line) for a file
    over ``max_bytes``, not UTF-8, missing columns, empty texts or labels, or without examples.
    """
    path = Path(path)
    text = read_data_text(path, max_bytes, "classification file")
    is_jsonl = path.suffix.lower() in (".jsonl", ".json", ".ndjson") or text.lstrip().startswith("{")
    examples = _read_jsonl(text, path) if is_jsonl else _read_csv(text, path)
    if not examples:
        raise ValueError(f"{path} has no examples")
    return examples


def _read_csv(text: str, path: Path) -> list[ClassificationExample]:
    reader = csv_reader(text, path)
    with csv_errors(path, reader):
        return _csv_examples(reader, path)


def _csv_examples(reader: csv.DictReader, path: Path) -> list[ClassificationExample]:
    columns = [c.strip() for c in reader.fieldnames or []]
    missing = [c for c in ("text", "label") if c not in columns]
    if missing:
        raise ValueError(f"{path.name}: the header must name the columns text and label (text_pair "
                         f"optional); missing {', '.join(missing)} (found: {shown_columns(columns)})")
    examples = []
    for row in reader:
        row = {(k or "").strip(): v for k, v in row.items()}
        if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
            continue                                   # a blank line
        examples.append(_example(row, reader.line_num, path))
    return examples


def _read_jsonl(text: str, path: Path) -> list[ClassificationExample]:
    examples = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}, line {number}: expected a JSON object with \"text\" and \"label\"")
        examples.append(_example(record, number, path))
    return examples


def _example(record: dict[str, Any], line: int, path: Path) -> ClassificationExample:
    text, pair, label = record.get("text"), record.get("text_pair"), record.get("label")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{path}, line {line}: \"text\" is missing or empty")
    if pair is not None and not isinstance(pair, str):
        raise ValueError(f"{path}, line {line}: \"text_pair\" must be a string")
    if not (isinstance(label, str) or is_int(label)) or not str(label).strip():
        raise ValueError(f"{path}, line {line}: \"label\" must be a non-empty string or an integer, got {label!r}")
    return ClassificationExample(text, pair if pair and pair.strip() else None, str(label).strip(), line)


def build_classification_dataset(examples: Sequence[ClassificationExample], tokenizer: WordPieceTokenizer,
                                 label2id: dict[str, int], max_seq_length: int, batch_size: int, seed: int = 0,
                                 shuffle: bool = True, segment_ids: bool | None = None) -> FeatureDataset:
    """Features in the tokenizer's template (BERT: ``[CLS] text [SEP] (pair [SEP])``), truncated longest-first, as a
    ``FeatureDataset``; ``segment_ids`` (default: the tokenizer's pair layout takes them, ``separated_once``)
    marks the pair's second text in the type ids."""
    if not examples:
        raise ValueError("no examples to build classification features from")
    check_known([e.label for e in examples], label2id, [f"line {e.line}" for e in examples])
    encodings = tokenizer.encode_batch([(e.text, e.text_pair) for e in examples], max_length=max_seq_length)
    rows = [np.asarray(enc.input_ids, dtype=np.int32) for enc in encodings]
    segments = [second_text_start(enc.sequence_ids) for enc in encodings]
    targets = np.asarray([label2id[e.label] for e in examples], dtype=np.int64)
    return FeatureDataset("label", rows, segments, targets, max_seq_length, batch_size,
                          tokenizer.pad_token_id, seed, shuffle,
                          segment_ids=separated_once(tokenizer) if segment_ids is None else segment_ids)
