"""The mask mix (BERT's Table 8): of the chosen positions, the shares given the mask token, a random token or kept.
At its default, 0.8/0.1/0.1, the draws and the data fingerprint are exactly those of the fixed 80/10/10."""
from __future__ import annotations

import hashlib
import random

import pytest
import torch

from engine.data.instance_plan import max_segment_tokens
from engine.data.masking import (
    IGNORE_INDEX, KIND_KEPT, KIND_MASK, KIND_NONE, KIND_RANDOM, check_mask_mix, mask_tokens_detailed,
)
from engine.data.pretraining import PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.token_store import TokenStore

V, MASK = 200, 4
ALLOWED = torch.arange(5, V)


def masked(mix, seed: int = 0, rate: float = 0.5, rows: int = 64, width: int = 96):
    """A batch of random ids (no specials but column 0), masked at ``rate`` with ``mix``: (ids, result)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (rows, width), generator=gen)
    special = torch.zeros(rows, width, dtype=torch.long)
    special[:, 0] = 1
    return ids, mask_tokens_detailed(ids, special, V, MASK, rate, gen, random_token_ids=ALLOWED, mask_mix=mix)


def test_all_mask_token():
    ids, res = masked((1.0, 0.0, 0.0))
    chosen = res.labels != IGNORE_INDEX
    assert chosen.sum() > 1000
    assert (res.input_ids[chosen] == MASK).all() and (res.mask_kind[chosen] == KIND_MASK).all()
    assert torch.equal(res.input_ids[~chosen], ids[~chosen])


def test_all_kept_leaves_the_input_but_still_labels():
    ids, res = masked((0.0, 0.0, 1.0))
    chosen = res.labels != IGNORE_INDEX
    assert chosen.sum() > 1000
    assert torch.equal(res.input_ids, ids), "keep-only must not change a single input token"
    assert torch.equal(res.labels[chosen], ids[chosen]) and (res.mask_kind[chosen] == KIND_KEPT).all()


def test_all_random_never_gives_the_mask_token():
    ids, res = masked((0.0, 1.0, 0.0))
    chosen = res.labels != IGNORE_INDEX
    assert (res.mask_kind[chosen] == KIND_RANDOM).all() and (res.mask_kind[~chosen] == KIND_NONE).all()
    assert not (res.input_ids == MASK).any()
    assert (res.input_ids[chosen] != ids[chosen]).float().mean() > 0.95       # a random id rarely hits the original
    assert torch.isin(res.input_ids[chosen], ALLOWED).all()


@pytest.mark.parametrize("mix", [(0.5, 0.3, 0.2), (0.8, 0.1, 0.1), (0.6, 0.0, 0.4), (0.0, 0.5, 0.5)])
def test_shares_over_many_draws_follow_the_setting(mix):
    counts = torch.zeros(4)
    for seed in range(10):
        _, res = masked(mix, seed)
        counts += torch.bincount(res.mask_kind.flatten(), minlength=4).float()
    shares = counts[[KIND_MASK, KIND_RANDOM, KIND_KEPT]] / counts[1:].sum()        # ~30,000 chosen positions
    for got, want in zip(shares.tolist(), mix):
        assert abs(got - want) < 0.015, (shares.tolist(), mix)


@pytest.mark.parametrize("bad, words", [
    ((0.8, 0.1), "three shares"), ((0.8, 0.3, 0.1), "add up to 1"), ((1.2, -0.1, -0.1), "between 0 and 1"),
    ((float("nan"), 0.5, 0.5), "between 0 and 1"), ("0.8,0.1,0.1", "three shares"), ((True, False, False), "three")])
def test_a_bad_mix_is_refused_in_a_sentence(bad, words):
    with pytest.raises(ValueError, match=words):
        check_mask_mix(bad)
    with pytest.raises(ValueError, match="^mask_mix"):
        PretrainingObjective(mask_mix=bad)


def test_the_default_mix_draws_exactly_the_fixed_80_10_10(tiny_tokenizer):
    """Batches and fingerprints at the default objective, hashed before the mix existed (bit-identical runs)."""
    rng = random.Random(0)
    words = "the cat dog sat on a mat bird sang in tree red blue big small house".split()
    docs = [[" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + "." for _ in range(rng.randint(5, 15))]
            for _ in range(12)]
    golden = {(True, False): ("27f898dbe852b267388a5835c7fe65bfb8f4486a585fa34629cb1c27ee603656",
                              "7387a196ebec304443194b1dd77d7642f06902944af5bfd22041da2b622e21a9"),
              (False, True): ("824b24bcd8642c99bb5f38bd2442e20b82c0abb34aa32bc1a4bc96cca52beabc",
                              "564fb81c2cf79497793e320e9d88f4888766629db7a76c843a00a14646b7db07")}
    for (nsp, whole_word), (fingerprint, batches) in golden.items():
        store = TokenStore.from_texts(docs, tiny_tokenizer, max_segment_tokens(32, nsp))
        for objective in ({}, {"objective": PretrainingObjective(mask_mix=(0.8, 0.1, 0.1))}):
            ds = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=3, nsp=nsp,
                                    whole_word=whole_word, **objective)
            digest = hashlib.sha256()
            for epoch in range(2):
                for index in range(3):
                    batch = ds.batch(epoch, index)
                    for tensor in (batch.input_ids, batch.labels, batch.mask_kind):
                        digest.update(tensor.numpy().tobytes())
            assert (ds.fingerprint(), digest.hexdigest()) == (fingerprint, batches)
        other = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=3, nsp=nsp,
                                   whole_word=whole_word, objective=PretrainingObjective(mask_mix=(0.7, 0.2, 0.1)))
        assert other.fingerprint() != fingerprint            # another mix is another run: a resume refuses it
