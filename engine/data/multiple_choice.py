"""Multiple-choice data: CSV files of a context, N choices and the right one; features of shape (C, S) each.

**The CSV** has a header naming ``context``, ``choice0`` .. ``choice{N-1}`` and ``label`` (SWAG's
layout; N = 2..5, from the header; other columns are ignored). ``label`` is the index of the
right choice, 0..N-1. SWAG's own files work too: ``sent1`` is the context and each choice is
``sent2`` followed by ``ending0`` .. ``ending3``, as ``transformers``' ``run_swag.py`` builds them.

**Features**: each example becomes N rows, the context and one choice as a pair in the tokenizer's template
(BERT: ``[CLS] context [SEP] choice [SEP]``; truncated longest-first to ``max_seq_length``), type ids 0 then 1
where the model reads segment ids (else all 0); a batch is (B, C, S), padded to its longest row, for
``BertWithHeads``' multiple-choice head (``BertForMultipleChoice``).
"""
from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from engine.data.data_files import csv_errors, csv_reader, read_data_text, shown_columns
from engine.data.features import FINGERPRINT_TAGS, FeatureDataset, FinetuneBatch, second_text_start
from engine.text.segment_ids import separated_once
from engine.text.tokenizer import WordPieceTokenizer

MIN_CHOICES, MAX_CHOICES = 2, 5
_CHOICE = re.compile(r"^(choice|ending)(\d+)$")


@dataclass
class ChoiceExample:
    """A context, its choices and the index of the right one; ``where`` ("file, line N") for messages."""

    context: str
    choices: list[str]
    label: int
    where: str = ""


def read_choice_file(path: str | Path, max_bytes: int | None = None) -> list[ChoiceExample]:
    """The examples of a multiple-choice CSV (see the module docstring).

    ``FileNotFoundError`` for a missing file; ``ValueError`` naming the file, the line and the fix for
    one over ``max_bytes``, empty, not UTF-8, with wrong columns, an empty text or a label out of range.
    """
    path = Path(path)
    text = read_data_text(path, max_bytes, "multiple-choice CSV")
    reader = csv_reader(text, path)
    with csv_errors(path, reader):
        return _read_choices(reader, path)


def _read_choices(reader: csv.DictReader, path: Path) -> list[ChoiceExample]:
    """The examples of an open multiple-choice CSV (:func:`read_choice_file`)."""
    columns = [(c or "").strip() for c in reader.fieldnames or []]
    swag = "sent1" in columns and "context" not in columns
    prefix = "ending" if swag else "choice"
    numbers = sorted(int(m.group(2)) for c in columns if (m := _CHOICE.match(c)) and m.group(1) == prefix)
    count = len(numbers)
    needed = ["sent1", "sent2", "label"] if swag else ["context", "label"]
    missing = [c for c in needed if c not in columns]
    if missing or numbers != list(range(count)) or not MIN_CHOICES <= count <= MAX_CHOICES:
        raise ValueError(f"{path.name}, line 1: the header must name context, choice0 .. choiceN-1 (N from "
                         f"{MIN_CHOICES} to {MAX_CHOICES}, numbered from 0 without gaps) and label; found "
                         f"{shown_columns(columns)}")
    examples = []
    for row in reader:
        row = {(k or "").strip(): (v or "") for k, v in row.items() if isinstance(v, str) or v is None}
        if not any(v.strip() for v in row.values()):
            continue                                                      # a blank line
        where = f"{path.name}, line {reader.line_num}"
        if swag:
            context = row.get("sent1", "")
            choices = [f"{row.get('sent2', '').strip()} {row.get(f'ending{k}', '').strip()}".strip()
                       for k in range(count)]
        else:
            context = row.get("context", "")
            choices = [row.get(f"choice{k}", "").strip() for k in range(count)]
        if not context.strip():
            raise ValueError(f"{where}: the context is empty")
        empty = [k for k, choice in enumerate(choices) if not choice]
        if empty:
            raise ValueError(f"{where}: {prefix}{empty[0]} is empty; every choice needs a text")
        examples.append(ChoiceExample(context.strip(), choices, _label(row.get("label", ""), count, where), where))
    if not examples:
        raise ValueError(f"{path.name} has a header but no examples")
    return examples


def _label(value: str, count: int, where: str) -> int:
    text = value.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ValueError(f"{where}: label is {text or 'empty'!r}; it must be the index of the right choice, "
                         f"0 to {count - 1}")
    label = int(text)
    if not 0 <= label < count:
        raise ValueError(f"{where}: label {label} is out of range: there are {count} choices, so it must be "
                         f"0 to {count - 1}")
    return label


class ChoiceDataset(FeatureDataset):
    """Multiple-choice features read by (epoch, index) like every ``FeatureDataset``: feature i is
    ``rows[i]``, C rows of token ids, with the index of the right one in ``targets[i]``."""

    def __init__(self, rows: Sequence[Sequence[np.ndarray]], segment_starts: Sequence[Sequence[int]],
                 labels: Sequence[int], max_seq_length: int, batch_size: int, pad_token_id: int = 0, seed: int = 0,
                 shuffle: bool = True, segment_ids: bool = True) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not rows:
            raise ValueError("the dataset has no examples")
        sizes = {len(choices) for choices in rows}
        if len(sizes) != 1:
            raise ValueError(f"every example needs the same number of choices; found {sorted(sizes)}")
        longest = max(len(r) for choices in rows for r in choices)
        if longest > max_seq_length:
            raise ValueError(f"a feature has {longest} tokens, more than max_seq_length={max_seq_length}")
        self.layout, self.max_seq_length, self.batch_size = "choices", max_seq_length, batch_size
        self.pad_token_id, self.seed, self.shuffle = pad_token_id, seed, shuffle
        self.num_choices = sizes.pop()
        self.rows = [tuple(np.asarray(r, dtype=np.int32) for r in choices) for choices in rows]
        self.segment_starts = np.asarray(segment_starts, dtype=np.int64)      # (N, C)
        self.targets = np.asarray(labels, dtype=np.int64).reshape(-1, 1)      # (N, 1)
        self.example_index = np.arange(len(rows))
        self.segment_ids = segment_ids
        self._order = None
        self._fingerprint = None

    def collate(self, indices: Sequence[int]) -> FinetuneBatch:
        """The examples ``indices`` as (B, C, S) tensors padded to their longest row."""
        chosen = [self.rows[i] for i in indices]
        width = max(len(r) for choices in chosen for r in choices)
        shape = (len(indices), self.num_choices, width)
        input_ids = torch.full(shape, self.pad_token_id, dtype=torch.long)                    # (B, C, S)
        lengths = torch.tensor([[len(r) for r in choices] for choices in chosen]).unsqueeze(-1)   # (B, C, 1)
        starts = torch.as_tensor(self.segment_starts[list(indices)]).unsqueeze(-1)               # (B, C, 1)
        for b, choices in enumerate(chosen):
            for c, row in enumerate(choices):
                input_ids[b, c, :len(row)] = torch.from_numpy(row.astype(np.int64))
        positions = torch.arange(width).view(1, 1, -1)                                         # (1, 1, S)
        attention_mask = (positions < lengths).long()                                          # (B, C, S)
        token_type_ids = ((positions >= starts) & (positions < lengths) & self.segment_ids).long()   # (B, C, S)
        labels = torch.as_tensor(self.targets[list(indices), 0])                               # (B,)
        return FinetuneBatch(input_ids, token_type_ids, attention_mask, choice_labels=labels)

    def fingerprint(self) -> str:
        """A hash of the token ids, segments, labels and batching (checked when a run resumes)."""
        if self._fingerprint is None:
            digest = hashlib.sha256(repr((FINGERPRINT_TAGS[self.layout], self.max_seq_length, self.batch_size, self.pad_token_id,
                                          self.seed, self.shuffle, len(self.rows), self.num_choices)).encode())
            for choices in self.rows:
                for row in choices:
                    digest.update(row.tobytes() + b"|")
            digest.update(self.segment_starts.tobytes())
            digest.update(np.ascontiguousarray(self.targets).tobytes())
            if not self.segment_ids:
                digest.update(b"|one segment")
            self._fingerprint = digest.hexdigest()
        return self._fingerprint


def build_choice_dataset(examples: Sequence[ChoiceExample], tokenizer: WordPieceTokenizer, max_seq_length: int,
                         batch_size: int, seed: int = 0, shuffle: bool = True,
                         segment_ids: bool | None = None) -> ChoiceDataset:
    """A (context, choice) pair row for every choice of every example, as a ``ChoiceDataset``; ``segment_ids``
    (default: the tokenizer's pair layout takes them, ``separated_once``) marks each choice in the type ids."""
    if not examples:
        raise ValueError("no examples to build multiple-choice features from")
    counts = {len(e.choices) for e in examples}
    if len(counts) != 1:
        first = next(e for e in examples if len(e.choices) != len(examples[0].choices))
        raise ValueError(f"{first.where}: {len(first.choices)} choices, but the first example has "
                         f"{len(examples[0].choices)}; every example needs the same number")
    count = counts.pop()
    encodings = tokenizer.encode_batch([(e.context, choice) for e in examples for choice in e.choices],
                                       max_length=max_seq_length)
    rows = [[np.asarray(enc.input_ids, dtype=np.int32) for enc in encodings[i * count:(i + 1) * count]]
            for i in range(len(examples))]
    starts = [[second_text_start(enc.sequence_ids) for enc in encodings[i * count:(i + 1) * count]]
              for i in range(len(examples))]
    return ChoiceDataset(rows, starts, [e.label for e in examples], max_seq_length, batch_size,
                         tokenizer.pad_token_id, seed, shuffle,
                         separated_once(tokenizer) if segment_ids is None else segment_ids)
