"""Pretraining data: NSP instances, collation layout, dynamic masks per collation, and the
seeded dataset (masking itself: test_masking.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from engine.data import pretraining
from engine.data.instance_plan import materialise, plan_instances
from engine.data.masking import IGNORE_INDEX, KIND_NONE
from engine.data.token_store import TokenStore
from engine.data.pretraining import (
    Instance, PretrainingDataset, VocabSpec, collate, create_instances, tokenize_documents,
)


def synthetic_documents(n_docs: int, n_sentences: int, rng: random.Random,
                        lengths: tuple[int, int] = (3, 12)) -> list[list[list[int]]]:
    """Token id = doc * 100000 + sentence * 100 + position: the id tells where it came from."""
    return [[[d * 100_000 + s * 100 + t for t in range(rng.randint(*lengths))] for s in range(n_sentences)]
            for d in range(n_docs)]


def where(token: int) -> tuple[int, int, int]:
    return token // 100_000, token % 100_000 // 100, token % 100


def test_nsp_pairs_are_balanced_and_honest():
    rng = random.Random(0)
    docs = synthetic_documents(60, 100, rng)
    flat_index = {tok: i for doc in docs for i, tok in enumerate(t for s in doc for t in s)}
    max_seq_length = 48
    instances = create_instances(docs, max_seq_length, 0.1, nsp=True, rng=random.Random(1))
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


def test_short_targets_are_about_short_seq_prob():
    docs = synthetic_documents(8, 1000, random.Random(0), lengths=(8, 8))
    for prob, low, high in ((0.1, 0.07, 0.14), (0.0, 0.0, 0.02)):
        instances = create_instances(docs, 67, prob, nsp=False, rng=random.Random(2))
        assert all(inst.tokens_b == [] and 1 <= len(inst.tokens_a) <= 65 for inst in instances)
        short = sum(len(inst.tokens_a) < 64 for inst in instances) / len(instances)
        assert low <= short <= high, (prob, short)


def test_instances_need_two_documents_for_nsp():
    docs = synthetic_documents(1, 20, random.Random(0))
    with pytest.raises(ValueError, match="at least two documents"):
        create_instances(docs, 32, nsp=True, rng=random.Random(0))
    assert create_instances(docs, 32, nsp=False, rng=random.Random(0))
    with pytest.raises(ValueError, match="too small"):
        create_instances(synthetic_documents(2, 5, random.Random(0)), 4, nsp=True)


def test_instances_are_seeded():
    docs = synthetic_documents(5, 30, random.Random(0))
    a = create_instances(docs, 32, rng=random.Random(5))
    b = create_instances(docs, 32, rng=random.Random(5))
    c = create_instances(docs, 32, rng=random.Random(6))
    assert a == b and a != c


# ---------------------------------------------------------------------------- collation
def test_collate_layout_and_dynamic_masks(tiny_tokenizer):
    vocab = VocabSpec.from_tokenizer(tiny_tokenizer)
    assert not set(vocab.random_token_ids.tolist()) & tiny_tokenizer.special_ids()
    instances = [Instance([10, 11, 12], [20, 21], False), Instance([30], [40, 41, 42, 43, 44], True),
                 Instance([50, 51], [], False)]
    batch = collate(instances, vocab, mlm_probability=0.0)
    cls_, sep, pad = tiny_tokenizer.cls_token_id, tiny_tokenizer.sep_token_id, tiny_tokenizer.pad_token_id
    assert batch.input_ids.tolist() == [
        [cls_, 10, 11, 12, sep, 20, 21, sep, pad],
        [cls_, 30, sep, 40, 41, 42, 43, 44, sep],
        [cls_, 50, 51, sep, pad, pad, pad, pad, pad],
    ]
    assert batch.token_type_ids.tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1, 1], [0] * 9]
    assert torch.equal(batch.attention_mask, (batch.input_ids != pad).long())
    assert batch.special_tokens_mask.tolist()[0] == [1, 0, 0, 0, 1, 0, 0, 1, 1]
    assert batch.next_sentence_label.tolist() == [0, 1, IGNORE_INDEX]
    assert (batch.labels == IGNORE_INDEX).all() and (batch.mask_kind == KIND_NONE).all()
    assert batch.num_tokens == 8 + 9 + 4 and batch.has_nsp
    assert collate(instances, vocab, 0.0, pad_to=16).input_ids.shape == (3, 16)
    with pytest.raises(ValueError):
        collate(instances, vocab, 0.0, pad_to=5)

    many = [Instance(list(range(10, 60)), list(range(60, 100)), False)] * 16
    gen = torch.Generator().manual_seed(0)
    first, second = collate(many, vocab, 0.15, gen), collate(many, vocab, 0.15, gen)
    assert not torch.equal(first.labels, second.labels), "masks must be fresh at every collation"
    assert torch.equal(first.token_type_ids, second.token_type_ids)
    inputs = first.model_inputs()
    assert set(inputs) == {"input_ids", "attention_mask", "token_type_ids", "labels", "next_sentence_label"}
    single = collate([Instance([10, 11], [], False)], vocab, 0.15, gen)
    assert not single.has_nsp and "next_sentence_label" not in single.model_inputs()


def test_collate_whole_word(tiny_tokenizer):
    vocab = VocabSpec.from_tokenizer(tiny_tokenizer)
    pieces = tiny_tokenizer.backend.encode("the cats walked and the dogs played", add_special_tokens=False).ids
    gen = torch.Generator().manual_seed(0)
    batch = collate([Instance(pieces, pieces, False)] * 64, vocab, 0.3, gen, whole_word=True)
    tokens = [tiny_tokenizer.id_to_token(i) for i in pieces]
    chosen = batch.labels != IGNORE_INDEX
    for i, tok in enumerate(tokens):
        if tok.startswith("##"):                 # a continuation is chosen iff the piece before it is
            assert torch.equal(chosen[:, 1 + i], chosen[:, i])
    assert 0.2 < chosen.sum() / (batch.special_tokens_mask == 0).sum() < 0.4


# ---------------------------------------------------------------------------- dataset
def text_documents(n_docs: int, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    words = "the cat dog sat on a mat bird sang in tree red blue big small house".split()
    return [[" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + "." for _ in range(rng.randint(5, 15))]
            for _ in range(n_docs)]


def test_dataset_epochs_batches_and_resume(tiny_tokenizer):
    docs = text_documents(12)
    ds = PretrainingDataset(docs, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=3)
    assert ds.instances(0) != ds.instances(1), "each epoch makes new instances"
    b0 = ds.batch(0, 0)
    assert b0.input_ids.shape[0] == 4 and b0.input_ids.shape[1] <= 32
    assert torch.equal(ds.batch(0, 0).input_ids, b0.input_ids), "a batch is rebuilt exactly from its seed"
    assert (b0.input_ids[:, 0] == tiny_tokenizer.cls_token_id).all()
    stream = ds.batches()
    run = [next(stream) for _ in range(ds.num_batches(0) + 3)]
    resumed = ds.batches(start_step=ds.num_batches(0) + 1)
    assert torch.equal(next(resumed).input_ids, run[-2].input_ids)
    other = PretrainingDataset(docs, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=4)
    assert other.instances(0) != ds.instances(0)
    fixed = PretrainingDataset(docs, tiny_tokenizer, max_seq_length=32, batch_size=4, pad_to_max_length=True,
                               nsp=False, whole_word=True)
    batch = next(iter(fixed))
    assert batch.input_ids.shape == (4, 32) and not batch.has_nsp
    with pytest.raises(ValueError, match="at least two documents"):
        PretrainingDataset(docs[:1], tiny_tokenizer, max_seq_length=32)


def test_tokenize_documents_splits_long_sentences(tiny_tokenizer):
    docs = [["the cat " * 40, "", "a dog."], ["[unused-only] ☃"]]
    ids = tokenize_documents(docs, tiny_tokenizer, max_sentence_tokens=16)
    assert [len(s) for s in ids[0]] == [16] * 5 + [3]
    assert len(ids) == 2 and all(s for doc in ids for s in doc)


def blocked(monkeypatch, tiny_tokenizer, n_docs: int = 40, **kwargs) -> PretrainingDataset:
    """A dataset whose epochs are many blocks (``BLOCK_TOKENS`` lowered), as a large corpus's are."""
    monkeypatch.setattr(pretraining, "BLOCK_TOKENS", 300)
    store = TokenStore.from_documents(tokenize_documents(text_documents(n_docs, seed=5), tiny_tokenizer, 29),
                                      tiny_tokenizer.vocab_size)
    return PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=2, **kwargs)


def test_a_large_corpus_is_read_in_seeded_blocks_at_random_positions(monkeypatch, tiny_tokenizer):
    ds = blocked(monkeypatch, tiny_tokenizer)
    assert len(ds._blocks(0)) > 5, "the epoch is cut into blocks"
    sequential = list(ds.epoch_batches(0))
    assert len(sequential) == ds.num_batches(0) and ds.has_batches(0, len(sequential))
    assert not ds.has_batches(0, len(sequential) + 1)
    again = blocked(monkeypatch, tiny_tokenizer)                # a fresh reader: batches rebuilt in any order
    for index in (len(sequential) - 1, 7, 0, 3):
        assert torch.equal(again.batch(0, index).input_ids, sequential[index].input_ids)
    flat = [t for d in ds.store.documents_token_ids() for s in d for t in s]
    text = " ".join(map(str, flat))
    for inst in ds.instances(0)[:50]:
        assert " ".join(map(str, inst.tokens_a)) in text, "a segment is consecutive tokens of the corpus"
    assert ds.instances(0) != ds.instances(1), "each epoch visits the documents in another order"
    counts = sum(len(ds._plan(0, b)) for b in range(len(ds._blocks(0))))
    assert counts == len(ds.instances(0))


def test_a_resumed_reader_finds_its_position_from_the_saved_block_counts(monkeypatch, tiny_tokenizer):
    ds = blocked(monkeypatch, tiny_tokenizer)
    late = ds.num_batches(0) - 2
    expected = ds.batch(0, late)
    fresh = blocked(monkeypatch, tiny_tokenizer)
    fresh.restore_position(0, ds.position_state(0))
    planned: list[int] = []
    real_plan = fresh._plan
    monkeypatch.setattr(fresh, "_plan", lambda e, b: planned.append(b) or real_plan(e, b))
    assert torch.equal(fresh.batch(0, late).input_ids, expected.input_ids)
    assert len(set(planned)) <= 2, "only the blocks holding the batch are planned"
    damaged = blocked(monkeypatch, tiny_tokenizer)
    damaged.restore_position(0, {"block_counts": ["x", -1]})       # ignored: the blocks are planned again
    assert torch.equal(damaged.batch(0, late).input_ids, expected.input_ids)


def test_a_pool_keeps_training_and_held_out_documents_apart():
    store = TokenStore.from_documents(synthetic_documents(30, 8, random.Random(1)), 3_000_000)
    held_out = [3, 11, 17]
    train_pool = [d for d in range(30) if d not in held_out]
    for pool, others in ((train_pool, held_out), (held_out, train_pool)):
        rows = plan_instances(store, np.asarray(pool), range(len(pool)), 64, 0.1, True,
                                          random.Random(0))
        used = {where(t)[0] for inst in materialise(store, rows) for t in inst.tokens_a + inst.tokens_b}
        assert used == set(pool), "every pool document is used, NotNext segments included, and no other"
