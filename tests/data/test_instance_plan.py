"""BERT's pretraining instances (engine.data.instance_plan), read as a ``PretrainingDataset`` over a token store
makes them: NSP pairs 50/50 and honest, segment lengths and short targets, two documents for NSP, seeded, and the
pools kept apart."""
from __future__ import annotations

import random

import numpy as np
import pytest

from engine.data.instance_plan import materialise, plan_instances
from engine.data.pretraining import Instance, PretrainingDataset
from engine.data.token_store import TokenStore


def synthetic_documents(n_docs: int, n_sentences: int, rng: random.Random,
                        lengths: tuple[int, int] = (3, 12)) -> list[list[list[int]]]:
    """Token id = doc * 100000 + sentence * 100 + position: the id tells where it came from."""
    return [[[d * 100_000 + s * 100 + t for t in range(rng.randint(*lengths))] for s in range(n_sentences)]
            for d in range(n_docs)]


def where(token: int) -> tuple[int, int, int]:
    return token // 100_000, token % 100_000 // 100, token % 100


def epoch_instances(docs: list[list[list[int]]], tokenizer, max_seq_length: int, short_seq_prob: float = 0.1,
                    nsp: bool = True, seed: int = 0) -> list[Instance]:
    """The first epoch's instances of a ``PretrainingDataset`` over a store of ``docs`` (one block: in pool order)."""
    store = TokenStore.from_documents(docs, 1 + max(t for doc in docs for s in doc for t in s))
    return PretrainingDataset(store, tokenizer, max_seq_length, short_seq_prob=short_seq_prob, nsp=nsp,
                              seed=seed).instances(0)


def test_nsp_pairs_are_balanced_and_honest(tiny_tokenizer):
    rng = random.Random(0)
    docs = synthetic_documents(60, 100, rng)
    flat_index = {tok: i for doc in docs for i, tok in enumerate(t for s in doc for t in s)}
    max_seq_length = 48
    instances = epoch_instances(docs, tiny_tokenizer, max_seq_length, 0.1, nsp=True, seed=1)
    assert len(instances) > 1000
    not_next = sum(inst.is_random_next for inst in instances) / len(instances)
    assert abs(not_next - 0.5) < 0.05
    for inst in instances:
        a, b = inst.tokens_a, inst.tokens_b
        assert a and b and len(a) + len(b) + 3 <= max_seq_length
        doc_a = {where(t)[0] for t in a}
        doc_b = {where(t)[0] for t in b}
        assert len(doc_a) == 1 and len(doc_b) == 1
        pos_a = [flat_index[t] for t in a]
        pos_b = [flat_index[t] for t in b]
        assert pos_a == list(range(pos_a[0], pos_a[0] + len(a)))   # A: consecutive text
        assert pos_b == list(range(pos_b[0], pos_b[0] + len(b)))   # B: consecutive text
        if inst.is_random_next:
            assert doc_a != doc_b, "NotNext B must come from another document"
        else:
            assert doc_a == doc_b and pos_b[0] > pos_a[-1]
            if len(a) + len(b) < max_seq_length - 3:                 # not truncated: B starts right after A
                assert pos_b[0] == pos_a[-1] + 1
                assert where(a[-1])[1] + 1 == where(b[0])[1] and where(b[0])[2] == 0


def test_short_targets_are_about_short_seq_prob(tiny_tokenizer):
    docs = synthetic_documents(8, 1000, random.Random(0), lengths=(8, 8))
    for prob, low, high in ((0.1, 0.07, 0.14), (0.0, 0.0, 0.02)):
        instances = epoch_instances(docs, tiny_tokenizer, 67, prob, nsp=False, seed=2)
        assert all(inst.tokens_b == [] and 1 <= len(inst.tokens_a) <= 65 for inst in instances)
        short = sum(len(inst.tokens_a) < 64 for inst in instances) / len(instances)
        assert low <= short <= high, (prob, short)


def test_instances_need_two_documents_for_nsp(tiny_tokenizer):
    docs = synthetic_documents(1, 20, random.Random(0))
    with pytest.raises(ValueError, match="at least two documents"):
        epoch_instances(docs, tiny_tokenizer, 32, nsp=True)
    assert epoch_instances(docs, tiny_tokenizer, 32, nsp=False)
    with pytest.raises(ValueError, match="too small"):
        epoch_instances(synthetic_documents(2, 5, random.Random(0)), tiny_tokenizer, 4, nsp=True)


def test_instances_are_seeded(tiny_tokenizer):
    docs = synthetic_documents(5, 30, random.Random(0))
    a = epoch_instances(docs, tiny_tokenizer, 32, seed=5)
    b = epoch_instances(docs, tiny_tokenizer, 32, seed=5)
    c = epoch_instances(docs, tiny_tokenizer, 32, seed=6)
    assert a == b and a != c


def test_a_pool_keeps_training_and_held_out_documents_apart():
    store = TokenStore.from_documents(synthetic_documents(30, 8, random.Random(1)), 3_000_000)
    held_out = [3, 11, 17]
    train_pool = [d for d in range(30) if d not in held_out]
    for pool, others in ((train_pool, held_out), (held_out, train_pool)):
        rows = plan_instances(store, np.asarray(pool), range(len(pool)), 64, 0.1, True,
                                          random.Random(0))
        used = {where(t)[0] for inst in materialise(store, rows) for t in inst.tokens_a + inst.tokens_b}
        assert used == set(pool), "every pool document is used, NotNext segments included, and no other"
