"""Fine-tuning data: tokenized features batched in a seeded order, and held-out splits.

A ``FeatureDataset`` holds one row of token ids per feature (a QA window, a sentence
(pair) or a tagged sentence), where its second segment starts (the first token of the second text, by the
tokenizer's sequence ids), and its integer targets (start/end positions, a class id, or one label per token
with -100 where unlabelled, kept as an (N, max_seq_length) array). ``segment_ids`` says whether a batch's
type ids mark the second segment (1 from its start) or are all 0, for a model that reads no segment ids
(``engine.text.segment_ids.uses_segment_ids``: RoBERTa, XLM-R, DistilBERT). Multiple choice (several rows per
example) is ``engine.data.multiple_choice.ChoiceDataset``, a subclass. Epoch ``e`` visits the features in ``random.Random(f"{seed}:{e}")`` order
(held-out data in file order), so batch ``(e, k)`` can be rebuilt exactly on resume. Rows
are padded to the longest in their batch.
"""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, fields
from typing import Callable, Hashable, Sequence, TypeVar

import numpy as np
import torch

# A dataset's target layout -> the batch fields its targets fill. Tasks declare the layout they train on
# (``TrainingTask.layout``), so two tasks may share a builder: span (QA), label (a class per text), tags (a label
# per token), choices (the right one of C rows).
TARGETS = {"span": ("start_positions", "end_positions"), "label": ("class_labels",), "tags": ("token_labels",),
           "choices": ("choice_labels",)}
PER_TOKEN = ("tags",)                        # layouts whose targets are a label per token
# What each layout's fingerprint hashes in its place: the task names datasets were keyed by when runs that may
# still resume were written, so their fingerprints stay the same.
FINGERPRINT_TAGS = {"span": "qa", "label": "classification", "tags": "token_classification",
                    "choices": "multiple_choice"}
IGNORE_INDEX = -100                          # an unlabelled token (as engine.model.heads)
T = TypeVar("T")


@dataclass
class FinetuneBatch:
    """A padded fine-tuning micro-batch; the targets of the other task are None."""

    input_ids: torch.Tensor                      # (B, S)
    token_type_ids: torch.Tensor                 # (B, S) 1 on the second segment; all 0 without segment_ids
    attention_mask: torch.Tensor                 # (B, S)
    start_positions: torch.Tensor | None = None  # (B,) QA: answer start token, 0 (first token) if not in window
    end_positions: torch.Tensor | None = None    # (B,)
    class_labels: torch.Tensor | None = None     # (B,) classification: class id
    token_labels: torch.Tensor | None = None     # (B, S) token classification: label id, -100 where unlabelled
    choice_labels: torch.Tensor | None = None    # (B,) multiple choice: the right choice (inputs are (B, C, S))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "FinetuneBatch":
        return FinetuneBatch(**{f.name: None if getattr(self, f.name) is None
                                else getattr(self, f.name).to(device, non_blocking=non_blocking)
                                for f in fields(self)})

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_tokens(self) -> int:
        """Real (unpadded) tokens in the batch."""
        return int(self.attention_mask.sum())


class FeatureDataset:
    """Tokenized features with targets of one ``layout`` (``TARGETS``), read by (epoch, index) like
    ``PretrainingDataset``."""

    def __init__(self, layout: str, rows: Sequence[np.ndarray], segment_starts: Sequence[int], targets: np.ndarray,
                 max_seq_length: int, batch_size: int, pad_token_id: int = 0, seed: int = 0,
                 shuffle: bool = True, example_index: Sequence[int] | None = None, segment_ids: bool = True) -> None:
        if layout not in TARGETS:
            raise ValueError(f"unknown target layout {layout!r}; choose one of {', '.join(TARGETS)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not rows:
            raise ValueError("the dataset has no examples")
        targets = np.asarray(targets, dtype=np.int64).reshape(len(rows), -1)   # (N, targets per feature)
        width = max_seq_length if layout in PER_TOKEN else len(TARGETS[layout])
        if targets.shape[1] != width or len(segment_starts) != len(rows):
            raise ValueError("rows, segment_starts and targets differ in length or width")
        longest = max(len(r) for r in rows)
        if longest > max_seq_length:
            raise ValueError(f"a feature has {longest} tokens, more than max_seq_length={max_seq_length}")
        self.layout, self.max_seq_length, self.batch_size = layout, max_seq_length, batch_size
        self.pad_token_id, self.seed, self.shuffle = pad_token_id, seed, shuffle
        self.rows = [np.asarray(r, dtype=np.int32) for r in rows]
        self.segment_starts = np.asarray(segment_starts, dtype=np.int64)
        self.targets = targets
        self.example_index = np.asarray(example_index if example_index is not None else range(len(rows)))
        self.segment_ids = segment_ids
        self._order: tuple[int, list[int]] | None = None
        self._fingerprint: str | None = None

    def without_segment_ids(self) -> None:
        """From now on every batch's type ids are 0 (the second segment unmarked): for a model that reads none."""
        self.segment_ids = False
        self._fingerprint = None

    def __len__(self) -> int:
        return len(self.rows)

    def order(self, epoch: int) -> list[int]:
        """Feature indices in the order ``epoch`` reads them (the last epoch asked for is cached)."""
        if not self.shuffle:
            return list(range(len(self.rows)))
        if self._order is None or self._order[0] != epoch:
            order = list(range(len(self.rows)))
            random.Random(f"{self.seed}:{epoch}").shuffle(order)
            self._order = (epoch, order)
        return self._order[1]

    def num_batches(self, epoch: int = 0) -> int:
        return math.ceil(len(self.rows) / self.batch_size)

    def batch(self, epoch: int, index: int) -> FinetuneBatch:
        """Batch ``index`` of ``epoch``: its features padded to the longest of them."""
        chosen = self.order(epoch)[index * self.batch_size:(index + 1) * self.batch_size]
        if not chosen:
            raise IndexError(f"epoch {epoch} has {self.num_batches(epoch)} batches; asked for {index}")
        return self.collate(chosen)

    def collate(self, indices: Sequence[int]) -> FinetuneBatch:
        """The features ``indices`` as one padded batch."""
        width = max(len(self.rows[i]) for i in indices)
        input_ids = torch.full((len(indices), width), self.pad_token_id, dtype=torch.long)   # (B, S)
        attention_mask = torch.zeros((len(indices), width), dtype=torch.long)                 # (B, S)
        positions = torch.arange(width).unsqueeze(0)                                          # (1, S)
        lengths = torch.tensor([len(self.rows[i]) for i in indices]).unsqueeze(1)            # (B, 1)
        starts = torch.as_tensor(self.segment_starts[list(indices)]).unsqueeze(1)            # (B, 1)
        for r, i in enumerate(indices):
            input_ids[r, :len(self.rows[i])] = torch.from_numpy(self.rows[i].astype(np.int64))
        attention_mask[positions < lengths] = 1
        token_type_ids = ((positions >= starts) & (positions < lengths) & self.segment_ids).long()   # (B, S)
        targets = torch.as_tensor(self.targets[list(indices)])                               # (B, K)
        if self.layout in PER_TOKEN:
            named = {TARGETS[self.layout][0]: targets[:, :width].contiguous()}               # (B, S)
        else:
            named = {name: targets[:, k].contiguous() for k, name in enumerate(TARGETS[self.layout])}  # (B,) each
        return FinetuneBatch(input_ids, token_type_ids, attention_mask, **named)

    def fingerprint(self) -> str:
        """A hash of the token ids, segments, targets and batching (checked when a run resumes)."""
        if self._fingerprint is None:
            digest = hashlib.sha256(repr((FINGERPRINT_TAGS[self.layout], self.max_seq_length, self.batch_size, self.pad_token_id,
                                          self.seed, self.shuffle, len(self.rows))).encode())
            for row in self.rows:
                digest.update(row.tobytes() + b"|")
            digest.update(self.segment_starts.tobytes())
            digest.update(np.ascontiguousarray(self.targets).tobytes())
            if not self.segment_ids:
                digest.update(b"|one segment")
            self._fingerprint = digest.hexdigest()
        return self._fingerprint


def second_text_start(sequence_ids: Sequence[int | None]) -> int:
    """Where a feature's second text starts: its first token of sequence id 1 (whatever special tokens the
    tokenizer's pair template puts before it); the feature's length when it has one text."""
    ids = list(sequence_ids)
    return ids.index(1) if 1 in ids else len(ids)


def split_held_out(items: Sequence[T], fraction: float, seed: int,
                   group: Callable[[T], Hashable] | None = None) -> tuple[list[T], list[T]]:
    """(training, held-out) items: a seeded ``fraction`` of the groups (default: each item its own)
    is held out, at least one when ``fraction`` > 0 and there are two groups; order is kept."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"the held-out fraction must be in [0, 1), got {fraction}")
    keys = [group(item) if group is not None else i for i, item in enumerate(items)]
    distinct = list(dict.fromkeys(keys))
    count = min(len(distinct) - 1, max(1, round(fraction * len(distinct)))) if fraction > 0 else 0
    if count <= 0:
        return list(items), []
    chosen = set(random.Random(seed).sample(distinct, count))
    train = [item for item, key in zip(items, keys) if key not in chosen]
    held_out = [item for item, key in zip(items, keys) if key in chosen]
    return train, held_out
