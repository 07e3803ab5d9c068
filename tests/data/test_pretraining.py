"""Pretraining data: collation layout, dynamic masks per collation, and the seeded dataset over a token store
(instances: test_instance_plan.py; masking itself: test_masking.py)."""
from __future__ import annotations

import random

import pytest
import torch

from engine.data import pretraining
from engine.data.instance_plan import max_segment_tokens
from engine.data.masking import IGNORE_INDEX, KIND_NONE
from engine.data.token_store import TokenStore
from engine.data.pretraining import Instance, PretrainingDataset, VocabSpec, collate


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


def text_store(documents: list[list[str]], tokenizer, max_seq_length: int = 32, nsp: bool = True) -> TokenStore:
    """The in-memory store of text documents, sentences cut to fit one segment (as the job's store is)."""
    return TokenStore.from_texts(documents, tokenizer, max_segment_tokens(max_seq_length, nsp))


def test_dataset_epochs_batches_and_resume(tiny_tokenizer):
    docs = text_documents(12)
    store = text_store(docs, tiny_tokenizer)
    ds = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=3)
    assert ds.instances(0) != ds.instances(1), "each epoch makes new instances"
    b0 = ds.batch(0, 0)
    assert b0.input_ids.shape[0] == 4 and b0.input_ids.shape[1] <= 32
    assert torch.equal(ds.batch(0, 0).input_ids, b0.input_ids), "a batch is rebuilt exactly from its seed"
    assert (b0.input_ids[:, 0] == tiny_tokenizer.cls_token_id).all()
    stream = ds.batches()
    run = [next(stream) for _ in range(ds.num_batches(0) + 3)]
    resumed = ds.batches(start_step=ds.num_batches(0) + 1)
    assert torch.equal(next(resumed).input_ids, run[-2].input_ids)
    other = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=4, seed=4)
    assert other.instances(0) != ds.instances(0)
    fixed = PretrainingDataset(text_store(docs, tiny_tokenizer, nsp=False), tiny_tokenizer, max_seq_length=32,
                               batch_size=4, pad_to_max_length=True, nsp=False, whole_word=True)
    batch = next(iter(fixed))
    assert batch.input_ids.shape == (4, 32) and not batch.has_nsp
    with pytest.raises(ValueError, match="at least two documents"):
        PretrainingDataset(text_store(docs[:1], tiny_tokenizer), tiny_tokenizer, max_seq_length=32)


def blocked(monkeypatch, tiny_tokenizer, n_docs: int = 40, **kwargs) -> PretrainingDataset:
    """A dataset whose epochs are many blocks (``BLOCK_TOKENS`` lowered), as a large corpus's are."""
    monkeypatch.setattr(pretraining, "BLOCK_TOKENS", 300)
    store = text_store(text_documents(n_docs, seed=5), tiny_tokenizer)
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
