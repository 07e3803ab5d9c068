"""Static masking (RoBERTa's): a text is masked the same way every time it is seen; dynamic masking (the default)
draws new masks every time. Masks are fixed per corpus token, so they hold across epochs and re-planned instances."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from engine.data.instance_plan import max_segment_tokens
from engine.data.masking import IGNORE_INDEX, KIND_KEPT, KIND_MASK, KIND_RANDOM
from engine.data.pretraining import PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.static_masking import hashed_uniform, static_mask_tokens, token_offsets
from engine.data.token_store import TokenStore


def corpus(tokenizer, nsp: bool, docs: int = 16) -> TokenStore:
    rng = random.Random(1)
    words = "the cat dog sat on a mat bird sang in tree red blue big small house".split()
    texts = [[" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) + "." for _ in range(rng.randint(6, 14))]
             for _ in range(docs)]
    return TokenStore.from_texts(texts, tokenizer, max_segment_tokens(32, nsp))


def masks_by_text(ds: PretrainingDataset, epoch: int) -> dict[tuple[int, ...], tuple[tuple, tuple]]:
    """Each instance of ``epoch`` by its original tokens -> (chosen positions, masked input)."""
    seen = {}
    for batch in ds.epoch_batches(epoch):
        original = torch.where(batch.labels != IGNORE_INDEX, batch.labels, batch.input_ids)
        for row in range(len(original)):
            real = batch.attention_mask[row].bool()
            key = tuple(original[row][real].tolist())
            chosen = tuple((batch.labels[row][real] != IGNORE_INDEX).nonzero().flatten().tolist())
            seen[key] = (chosen, tuple(batch.input_ids[row][real].tolist()))
    return seen


@pytest.mark.parametrize("whole_word", [False, True])
def test_static_masks_an_instance_the_same_in_two_epochs_and_dynamic_does_not(tiny_tokenizer, whole_word):
    store = corpus(tiny_tokenizer, nsp=False)
    settings = dict(max_seq_length=32, batch_size=8, nsp=False, short_seq_prob=0.0, whole_word=whole_word, seed=5)
    static = PretrainingDataset(store, tiny_tokenizer, objective=PretrainingObjective(static=True), **settings)
    dynamic = PretrainingDataset(store, tiny_tokenizer, **settings)
    for ds, same in ((static, True), (dynamic, False)):
        first, second = masks_by_text(ds, 0), masks_by_text(ds, 1)
        both = sorted(set(first) & set(second))
        assert len(both) > 20, "the instances must recur for the comparison to mean anything"
        agree = [first[text] == second[text] for text in both]
        if same:
            assert all(agree), "static masking must mask an instance the same way in every epoch"
        else:
            assert sum(agree) < len(both) / 4, "dynamic masking must draw new masks each epoch"


def test_static_masks_hold_across_re_planned_pairs(tiny_tokenizer):
    """With NSP the pairs are re-planned each epoch (split points, NotNext partners): a corpus token keeps its mask
    in whatever instance it lands."""
    store = corpus(tiny_tokenizer, nsp=True)
    ds = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=8, seed=2,
                            objective=PretrainingObjective(static=True))
    fates: dict[int, set[tuple[int, int]]] = {}
    sightings: dict[int, int] = {}
    for epoch in range(3):
        for index in range(ds.num_batches(epoch)):
            rows = ds._rows(epoch, index * 8, (index + 1) * 8)
            batch = ds.batch(epoch, index)
            offsets = token_offsets(rows, batch.input_ids.shape[1])
            for offset, kind, token in zip(offsets[offsets >= 0].tolist(), batch.mask_kind[offsets >= 0].tolist(),
                                           batch.input_ids[offsets >= 0].tolist()):
                fates.setdefault(offset, set()).add((kind, token))
                sightings[offset] = sightings.get(offset, 0) + 1
    assert all(len(fate) == 1 for fate in fates.values()), "a corpus token got two different fates"
    assert sum(count >= 2 for count in sightings.values()) > 0.9 * store.num_tokens
    assert sum(kind != 0 for fate in fates.values() for kind, _ in fate) > 0.1 * len(fates)   # ~15% masked


def test_static_shares_and_rate_follow_the_settings():
    rows, width, v = 200, 64, 300
    ids = torch.randint(5, v, (rows, width), generator=torch.Generator().manual_seed(0))
    special = torch.zeros(rows, width, dtype=torch.long)
    special[:, 0] = special[:, -1] = 1
    offsets = torch.arange(rows * width).view(rows, width).masked_fill(special.bool(), -1)
    res = static_mask_tokens(ids, special, offsets, seed=7, vocab_size=v, mask_token_id=4, mlm_probability=0.2,
                             random_token_ids=torch.arange(5, v), mask_mix=(0.6, 0.3, 0.1))
    chosen = res.labels != IGNORE_INDEX
    assert abs(chosen.sum() / (special == 0).sum() - 0.2) < 0.01 and not chosen[special.bool()].any()
    for kind, share in ((KIND_MASK, 0.6), (KIND_RANDOM, 0.3), (KIND_KEPT, 0.1)):
        assert abs((res.mask_kind == kind).sum() / chosen.sum() - share) < 0.03
    again = static_mask_tokens(ids, special, offsets, seed=7, vocab_size=v, mask_token_id=4, mlm_probability=0.2,
                               random_token_ids=torch.arange(5, v), mask_mix=(0.6, 0.3, 0.1))
    other_seed = static_mask_tokens(ids, special, offsets, seed=8, vocab_size=v, mask_token_id=4, mlm_probability=0.2,
                                    random_token_ids=torch.arange(5, v), mask_mix=(0.6, 0.3, 0.1))
    assert torch.equal(again.input_ids, res.input_ids) and torch.equal(again.labels, res.labels)
    assert not torch.equal(other_seed.labels, res.labels)
    with pytest.raises(ValueError, match="offset"):
        static_mask_tokens(ids, special, torch.full_like(offsets, -1), 7, v, 4)


def test_hashed_uniforms_are_uniform_and_independent_per_stream():
    keys = np.arange(100_000)
    a, b = hashed_uniform(3, keys, 1), hashed_uniform(3, keys, 2)
    assert 0.0 <= a.min() and a.max() < 1.0 and abs(a.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02 and abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 0.02
    assert np.array_equal(a, hashed_uniform(3, keys, 1)) and not np.array_equal(a, hashed_uniform(4, keys, 1))


def test_static_masking_is_its_own_run(tiny_tokenizer):
    store = corpus(tiny_tokenizer, nsp=True)
    static = PretrainingDataset(store, tiny_tokenizer, seed=1, objective=PretrainingObjective(static=True))
    assert static.fingerprint() != PretrainingDataset(store, tiny_tokenizer, seed=1).fingerprint()
