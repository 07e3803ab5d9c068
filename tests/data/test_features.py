"""FeatureDataset (seeded order, padding, segments, fingerprint) and held-out splits."""
from __future__ import annotations

import numpy as np
import pytest

from engine.data.features import FeatureDataset, split_held_out


def dataset(**overrides) -> FeatureDataset:
    rows = [np.arange(2, 2 + n) for n in (3, 5, 4, 6, 2)]
    values = dict(layout="label", rows=rows, segment_starts=[3, 2, 4, 3, 2], targets=np.arange(5) % 2,
                  max_seq_length=8, batch_size=2, seed=0)
    values.update(overrides)
    return FeatureDataset(**values)


def test_batches_pad_and_mark_segments():
    data = dataset(shuffle=False)
    assert len(data) == 5 and data.num_batches(0) == 3
    batch = data.batch(0, 0)
    assert batch.input_ids.tolist() == [[2, 3, 4, 0, 0], [2, 3, 4, 5, 6]]       # (B, S), padded to the longest
    assert batch.attention_mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch.token_type_ids.tolist() == [[0, 0, 0, 0, 0], [0, 0, 1, 1, 1]]
    assert batch.class_labels.tolist() == [0, 1] and batch.num_tokens == 8 and batch.size == 2
    assert data.batch(0, 2).size == 1
    with pytest.raises(IndexError):
        data.batch(0, 3)


def test_order_is_seeded_per_epoch_and_fingerprint_follows_the_data():
    data = dataset()
    assert sorted(data.order(0)) == list(range(5)) and data.order(0) == dataset().order(0)
    assert [data.order(e) for e in range(4)] != [data.order(0)] * 4
    assert data.fingerprint() == dataset().fingerprint()
    assert data.fingerprint() != dataset(seed=1).fingerprint()
    assert data.fingerprint() != dataset(targets=np.ones(5)).fingerprint()
    assert data.fingerprint() != dataset(batch_size=3).fingerprint()


def test_bad_datasets_are_refused():
    with pytest.raises(ValueError, match="no examples"):
        dataset(rows=[], segment_starts=[], targets=np.zeros(0))
    with pytest.raises(ValueError, match="more than max_seq_length"):
        dataset(max_seq_length=5)
    with pytest.raises(ValueError, match="unknown target layout 'ner'; choose one of span, label, tags, choices"):
        dataset(layout="ner")
    with pytest.raises(ValueError, match="differ"):
        dataset(layout="span")                              # a span is two targets per feature


def test_split_held_out_keeps_groups_together():
    items = [(g, i) for g in range(10) for i in range(3)]
    train, held_out = split_held_out(items, 0.2, seed=0, group=lambda item: item[0])
    assert len(held_out) == 6 and {g for g, _ in held_out}.isdisjoint({g for g, _ in train})
    assert split_held_out(items, 0.2, seed=0, group=lambda item: item[0]) == (train, held_out)
    assert split_held_out(items, 0.0, seed=0) == (items, [])
    assert len(split_held_out(items[:2], 0.01, seed=0)[1]) == 1         # at least one when asked
    assert split_held_out(items[:1], 0.5, seed=0) == (items[:1], [])  # but never all of it
    with pytest.raises(ValueError):
        split_held_out(items, 1.0, seed=0)
