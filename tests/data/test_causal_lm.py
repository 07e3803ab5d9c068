"""The left-to-right LM's data: nothing masked, labels are the inputs shifted by one (the last real position and
padding have none), one text per row (no NSP)."""
from __future__ import annotations

import pytest
import torch

from engine.data.causal_lm import next_token_labels
from engine.data.masking import IGNORE_INDEX, KIND_NONE
from engine.data.pretraining import Instance, PretrainingDataset, VocabSpec, collate
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.token_store import TokenStore

CLM = PretrainingObjective("clm")


def test_labels_are_the_inputs_shifted_by_one():
    ids = torch.tensor([[2, 10, 11, 12, 3, 0, 0], [2, 20, 21, 22, 23, 24, 3]])
    mask = (ids != 0).long()
    assert next_token_labels(ids, mask).tolist() == [[10, 11, 12, 3, -100, -100, -100], [20, 21, 22, 23, 24, 3, -100]]
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        next_token_labels(ids[0], mask[0])


def test_collate_keeps_the_input_and_labels_every_next_token(tiny_tokenizer):
    vocab = VocabSpec.from_tokenizer(tiny_tokenizer)
    batch = collate([Instance([10, 11, 12], [], False), Instance([30], [], False)], vocab, 0.15,
                    torch.Generator().manual_seed(0), objective=CLM)
    cls_, sep, pad = tiny_tokenizer.cls_token_id, tiny_tokenizer.sep_token_id, tiny_tokenizer.pad_token_id
    assert batch.input_ids.tolist() == [[cls_, 10, 11, 12, sep], [cls_, 30, sep, pad, pad]]   # no mask token
    assert batch.labels.tolist() == [[10, 11, 12, sep, IGNORE_INDEX], [30, sep] + [IGNORE_INDEX] * 3]
    real = batch.attention_mask.bool()
    shifted = torch.where(real[:, 1:], batch.input_ids[:, 1:], IGNORE_INDEX)
    assert torch.equal(batch.labels[:, :-1], shifted)
    assert (batch.mask_kind == KIND_NONE).all() and not batch.has_nsp


def test_a_clm_dataset_reads_one_text_per_row_and_refuses_pairs(tiny_tokenizer):
    texts = [["the cat sat on the mat.", "the dog sang."], ["a bird sang in a tree.", "red house."]] * 3
    store = TokenStore.from_texts(texts, tiny_tokenizer, 30)
    with pytest.raises(ValueError, match="turn next-sentence prediction off"):
        PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=2, nsp=True, objective=CLM)
    ds = PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=2, nsp=False, objective=CLM)
    for batch in ds.epoch_batches(0):
        assert (batch.token_type_ids == 0).all() and (batch.input_ids != tiny_tokenizer.mask_token_id).all()
        assert torch.equal(batch.labels, next_token_labels(batch.input_ids, batch.attention_mask))
    assert ds.fingerprint() != PretrainingDataset(store, tiny_tokenizer, max_seq_length=32, batch_size=2,
                                                  nsp=False).fingerprint()


@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="xlm"), "objective must be one of mlm, clm"),
    (dict(kind="clm", static=True), "static_masking is for the masked LM"),
    (dict(kind="clm", mask_mix=(1.0, 0.0, 0.0)), "mask_mix is for the masked LM"),
    (dict(static="yes"), "static_masking must be true or false")])
def test_objective_settings_are_checked(kwargs, words):
    with pytest.raises(ValueError, match=words):
        PretrainingObjective(**kwargs)
