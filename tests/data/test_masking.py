"""Dynamic MLM masking: statistics (15%, 80/10/10), seeding, whole-word masking, and the
same contract as transformers' DataCollatorForLanguageModeling."""
from __future__ import annotations

import torch

from engine.data.masking import (
    IGNORE_INDEX, KIND_KEPT, KIND_MASK, KIND_NONE, KIND_RANDOM, mask_tokens, mask_tokens_detailed,
    whole_word_ids_from,
)
from engine.data.pretraining import VocabSpec

V = 200
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = {PAD, UNK, CLS, SEP, MASK}
ALLOWED = torch.arange(5, V)


def padded_batch(gen: torch.Generator, batch: int = 64, seq: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    """Random rows ``[CLS] w... [SEP] [PAD]...`` of random lengths: (ids, special mask), (B, S)."""
    ids = torch.randint(5, V, (batch, seq), generator=gen)
    special = torch.zeros(batch, seq, dtype=torch.long)
    lengths = torch.randint(seq // 4, seq + 1, (batch,), generator=gen)
    for r, n in enumerate(lengths.tolist()):
        ids[r, 0], ids[r, n - 1] = CLS, SEP
        ids[r, n:] = PAD
        special[r, 0] = special[r, n - 1:] = 1
    return ids, special


def masking_counts(mlm_probability: float, batches: int = 40, seed: int = 0, **kwargs) -> dict[str, float]:
    gen = torch.Generator().manual_seed(seed)
    totals = dict(eligible=0, chosen=0, mask=0, random=0, kept=0)
    for _ in range(batches):
        ids, special = padded_batch(gen)
        before = ids.clone()
        res = mask_tokens_detailed(ids, special, V, MASK, mlm_probability, gen, random_token_ids=ALLOWED, **kwargs)
        assert torch.equal(ids, before), "the input must not be modified"
        chosen = res.labels != IGNORE_INDEX
        assert not (chosen & special.bool()).any(), "a special or padding position was chosen"
        assert torch.equal(chosen, res.mask_kind != KIND_NONE)
        assert torch.equal(res.labels[chosen], ids[chosen])
        assert (res.input_ids[res.mask_kind == KIND_MASK] == MASK).all()
        unchanged = (res.mask_kind == KIND_NONE) | (res.mask_kind == KIND_KEPT)
        assert torch.equal(res.input_ids[unchanged], ids[unchanged])
        randoms = res.input_ids[res.mask_kind == KIND_RANDOM]
        assert not any(int(t) in SPECIALS for t in randoms), "a random replacement was a special id"
        totals["eligible"] += int((special == 0).sum())
        totals["chosen"] += int(chosen.sum())
        for name, kind in (("mask", KIND_MASK), ("random", KIND_RANDOM), ("kept", KIND_KEPT)):
            totals[name] += int((res.mask_kind == kind).sum())
    return {"rate": totals["chosen"] / totals["eligible"],
            **{k: totals[k] / totals["chosen"] for k in ("mask", "random", "kept")}}


# ---------------------------------------------------------------------------- masking
def test_masking_statistics_15_percent_and_80_10_10():
    stats = masking_counts(0.15)
    assert abs(stats["rate"] - 0.15) < 0.01
    assert abs(stats["mask"] - 0.8) < 0.02
    assert abs(stats["random"] - 0.1) < 0.02
    assert abs(stats["kept"] - 0.1) < 0.02


def test_masking_rate_is_configurable():
    assert abs(masking_counts(0.3, batches=20)["rate"] - 0.3) < 0.01
    gen = torch.Generator().manual_seed(0)
    ids, special = padded_batch(gen)
    _, labels = mask_tokens(ids, special, V, MASK, 0.0, gen)
    assert (labels == IGNORE_INDEX).all()


def test_masking_is_seeded():
    ids, special = padded_batch(torch.Generator().manual_seed(1))
    a = mask_tokens(ids, special, V, MASK, generator=torch.Generator().manual_seed(7))
    b = mask_tokens(ids, special, V, MASK, generator=torch.Generator().manual_seed(7))
    c = mask_tokens(ids, special, V, MASK, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_default_random_ids_avoid_specials_seen_and_mask():
    gen = torch.Generator().manual_seed(3)
    ids, special = padded_batch(gen)
    res = mask_tokens_detailed(ids, special, V, MASK, 0.5, gen)   # no random_token_ids given
    randoms = res.input_ids[res.mask_kind == KIND_RANDOM]
    assert randoms.numel() > 0
    assert not any(int(t) in {PAD, CLS, SEP, MASK} for t in randoms)
    assert res.input_ids.dtype == torch.long and res.labels.dtype == torch.long


def test_whole_word_masking_chooses_all_pieces_together():
    gen = torch.Generator().manual_seed(0)
    chosen_total = eligible_total = 0
    for _ in range(30):
        ids, special = padded_batch(gen)
        starts = torch.rand(ids.shape, generator=gen) < 0.4            # words of 1..many pieces
        words = (starts | special.bool()).long().cumsum(1).masked_fill(special.bool(), -1)  # (B, S)
        res = mask_tokens_detailed(ids, special, V, MASK, 0.15, gen, whole_word_ids=words, random_token_ids=ALLOWED)
        chosen = res.labels != IGNORE_INDEX
        assert not (chosen & special.bool()).any()
        for r in range(ids.shape[0]):
            for w in words[r].unique().tolist():
                if w < 0:
                    continue
                state = chosen[r][words[r] == w]
                assert state.all() or not state.any(), "a word was only partly chosen"
        chosen_total += int(chosen.sum())
        eligible_total += int((special == 0).sum())
    assert abs(chosen_total / eligible_total - 0.15) < 0.015


def test_whole_word_ids_from_tokenizer(tiny_tokenizer):
    vocab = VocabSpec.from_tokenizer(tiny_tokenizer)
    enc = tiny_tokenizer.encode("the cats walked", "a dog sang")
    ids = torch.tensor([enc.input_ids])
    special = torch.tensor([enc.special_tokens_mask])
    words = whole_word_ids_from(ids, special, vocab.continuation)[0].tolist()
    assert enc.tokens == ["[CLS]", "the", "cat", "##s", "walk", "##ed", "[SEP]", "a", "dog", "sang", "[SEP]"]
    assert words[0] == words[6] == words[10] == -1
    assert words[2] == words[3] and words[4] == words[5]
    assert len({words[i] for i in (1, 2, 4, 7, 8, 9)}) == 6


def test_mask_tokens_contract_matches_transformers(tiny_tokenizer):
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    hf_tok = BertTokenizerFast(tokenizer_object=tiny_tokenizer.backend, unk_token="[UNK]", sep_token="[SEP]",
                               pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")
    collator = DataCollatorForLanguageModeling(hf_tok, mlm_probability=0.15)
    vocab_size = len(hf_tok)
    assert vocab_size == tiny_tokenizer.vocab_size
    gen = torch.Generator().manual_seed(0)
    ours = {"chosen": 0, "mask": 0, "eligible": 0}
    theirs = {"chosen": 0, "mask": 0, "eligible": 0}
    torch.manual_seed(0)
    for _ in range(20):
        ids = torch.randint(5, vocab_size, (32, 64), generator=gen)
        ids[:, 0], ids[:, -1] = tiny_tokenizer.cls_token_id, tiny_tokenizer.sep_token_id
        ids[:8, 40:] = tiny_tokenizer.pad_token_id
        ids[:8, 39] = tiny_tokenizer.sep_token_id
        special = torch.tensor([hf_tok.get_special_tokens_mask(row, already_has_special_tokens=True)
                                for row in ids.tolist()])
        m_ours, l_ours = mask_tokens(ids, special, vocab_size, tiny_tokenizer.mask_token_id, 0.15, gen)
        m_theirs, l_theirs = collator.torch_mask_tokens(ids.clone(), special.clone())
        for (m, lab), acc in (((m_ours, l_ours), ours), ((m_theirs, l_theirs), theirs)):
            assert m.shape == lab.shape == ids.shape and m.dtype == lab.dtype == torch.long
            chosen = lab != -100
            assert torch.equal(lab[chosen], ids[chosen])               # labels: original ids where chosen
            assert not (chosen & special.bool()).any()
            assert torch.equal(m[~chosen], ids[~chosen])                # untouched elsewhere
            acc["chosen"] += int(chosen.sum())
            acc["mask"] += int((m == tiny_tokenizer.mask_token_id).sum())
            acc["eligible"] += int((special == 0).sum())
    rate = lambda acc: acc["chosen"] / acc["eligible"]  # noqa: E731
    assert abs(rate(ours) - rate(theirs)) < 0.015 and abs(rate(ours) - 0.15) < 0.01
    assert abs(ours["mask"] / ours["chosen"] - theirs["mask"] / theirs["chosen"]) < 0.03


# ---------------------------------------------------------------------------- instances
