"""ALBERT's sentence-order pairs (``pair_task="sop"``): A and B are consecutive text of one document, every negative
is a positive pair turned round (the same tokens, the same document), the labels are balanced, a one-document corpus
is enough, and the setting changes the data's fingerprint while the NSP default plans exactly as before."""
from __future__ import annotations

import random

import numpy as np
import pytest

from engine.data.instance_plan import materialise, plan_instances
from engine.data.pretraining import PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.token_store import TokenStore

SOP = PretrainingObjective(pair_task="sop")


def synthetic_store(n_docs: int, n_sentences: int, seed: int = 0, lengths: tuple[int, int] = (1, 12)) -> TokenStore:
    """Token id = doc * 100000 + sentence * 100 + position + 1, so an id tells where it came from."""
    rng = random.Random(seed)
    docs = [[[d * 100_000 + s * 100 + t + 1 for t in range(rng.randint(*lengths))] for s in range(n_sentences)]
            for d in range(n_docs)]
    return TokenStore.from_documents(docs, 1 + max(t for doc in docs for s in doc for t in s))


def document_starts(store: TokenStore) -> np.ndarray:
    """(D,) the corpus offset of each document's first token: ``searchsorted`` finds an offset's document."""
    return np.asarray([store.sentence_ends(d)[0] for d in range(store.num_documents)])


@pytest.mark.parametrize("max_seq_length", [512, 24])
def test_every_negative_is_a_positive_pair_swapped_from_one_document(max_seq_length):
    store = synthetic_store(1000, 10)
    starts = document_starts(store)
    rows = plan_instances(store, np.arange(1000), range(1000), max_seq_length, 0.1, True, random.Random(1), "sop")
    assert len(rows) >= 1000
    for (a0, a1, b0, b1, swapped), inst in zip(rows.tolist(), materialise(store, rows)):
        assert a0 < a1 and b0 < b1 and (a1 - a0) + (b1 - b0) <= max_seq_length - 3
        ends = np.searchsorted(starts, [a0, a1 - 1, b0, b1 - 1], side="right")
        assert len(set(ends.tolist())) == 1, "one document per pair"
        first, second = ((b0, b1), (a0, a1)) if swapped else ((a0, a1), (b0, b1))
        assert first[1] <= second[0], "the earlier text is B exactly when the pair is swapped"
        if max_seq_length == 512:                   # nothing truncated: the two segments are adjacent text
            assert first[1] == second[0]
            in_order = inst.tokens_b + inst.tokens_a if swapped else inst.tokens_a + inst.tokens_b
            assert in_order == store.token_ids(first[0], second[1])
    share = rows[:, 4].mean()
    assert 0.45 < share < 0.55, share


def test_a_one_document_corpus_makes_sentence_order_pairs_and_a_lone_sentence_is_cut(tiny_tokenizer):
    store = synthetic_store(1, 1, lengths=(20, 20))                  # one document of one 20-token sentence
    rows = plan_instances(store, np.arange(1), [0], 64, 0.0, True, random.Random(0), "sop")
    assert len(rows) == 1
    a0, a1, b0, b1, swapped = rows[0].tolist()
    assert sorted([(a0, a1), (b0, b1)]) == [(0, min(a1, b1)), (min(a1, b1), 20)]
    with pytest.raises(ValueError, match="two documents"):          # NSP needs another document; SOP does not
        PretrainingDataset(store, tiny_tokenizer, 64, batch_size=1, nsp=True)
    data = PretrainingDataset(synthetic_store(1, 40), tiny_tokenizer, 64, batch_size=4, nsp=True, objective=SOP)
    batch = data.batch(0, 0)
    assert batch.has_nsp and set(batch.next_sentence_label.tolist()) <= {0, 1}
    assert [int(i.is_random_next) for i in data.instances(0)[:4]] == batch.next_sentence_label.tolist()


def test_sentence_order_is_another_run_and_nsp_plans_as_before(tiny_tokenizer):
    store = synthetic_store(6, 20)
    nsp = PretrainingDataset(store, tiny_tokenizer, 48, batch_size=4, seed=2)
    sop = PretrainingDataset(store, tiny_tokenizer, 48, batch_size=4, seed=2, objective=SOP)
    explicit = PretrainingDataset(store, tiny_tokenizer, 48, batch_size=4, seed=2,
                                  objective=PretrainingObjective(pair_task="nsp"))
    assert explicit.fingerprint() == nsp.fingerprint() != sop.fingerprint()
    assert explicit.instances(0) == nsp.instances(0) != sop.instances(0)
    rows = plan_instances(store, np.arange(6), range(6), 48, 0.1, True, random.Random(3))
    assert np.array_equal(rows, plan_instances(store, np.arange(6), range(6), 48, 0.1, True, random.Random(3), "nsp"))
    with pytest.raises(ValueError, match="pair_task must be"):
        plan_instances(store, np.arange(6), range(6), 48, 0.1, True, random.Random(3), "xyz")


@pytest.mark.parametrize("kwargs, words", [
    (dict(pair_task="order"), "pair_task must be one of nsp, sop"),
    (dict(kind="clm", pair_task="sop"), "objective clm reads no pairs"),
    (dict(kind="rtd", pair_task="sop"), "objective rtd reads no pairs")])
def test_pair_task_settings_are_checked(kwargs, words):
    with pytest.raises(ValueError, match=words):
        PretrainingObjective(**kwargs)
