"""RoBERTa's input formats (``engine.data.packing``) as a learner meets them in a batch: full-sentences inputs are
contiguous text in order that goes on into the next document after one separator token (a special token, never
masked), doc-sentences inputs never leave their document, sentence-pair segments are single sentences, no input
is longer than the length, packed inputs carry no NSP label, nothing of the corpus is lost or read twice, static
masks follow the corpus offsets, and the default plans exactly as before the setting existed."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from engine.data.masking import IGNORE_INDEX
from engine.data.packing import plan_rows
from engine.data.pretraining import PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.token_store import TokenStore
from engine.text.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

BASE = len(SPECIAL_TOKENS)          # the corpus's token at offset k has id BASE + k: an id tells where it came from
LENGTH = 24


def corpus(n_docs: int = 40, seed: int = 0) -> tuple[TokenStore, WordPieceTokenizer]:
    """Documents of 1-6 sentences of 1-12 tokens, and a vocabulary with one piece per corpus token."""
    rng = random.Random(seed)
    docs, offset = [], 0
    for _ in range(n_docs):
        doc = []
        for _ in range(rng.randint(1, 6)):
            n = rng.randint(1, 12)
            doc.append([BASE + offset + t for t in range(n)])
            offset += n
        docs.append(doc)
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)} | {f"w{k}": BASE + k for k in range(offset)}
    return TokenStore.from_documents(docs, BASE + offset), WordPieceTokenizer.from_vocab(vocab)


def dataset(packing: str, nsp: bool = False, **objective) -> tuple[PretrainingDataset, TokenStore]:
    store, tokenizer = corpus()
    return PretrainingDataset(store, tokenizer, LENGTH, 8, nsp=nsp, seed=3,
                              objective=PretrainingObjective(packing=packing, **objective)), store


def pieces(tokens: list[int], separators: tuple[int, ...], sep: int) -> list[list[int]]:
    """The corpus offsets of each document's text in one input, split at its separators."""
    assert all(tokens[s] == sep for s in separators)
    bounds = [-1, *separators, len(tokens)]
    return [[t - BASE for t in tokens[a + 1:b]] for a, b in zip(bounds[:-1], bounds[1:])]


def boundaries(store: TokenStore) -> tuple[set[int], set[int]]:
    """The corpus offsets where a sentence begins, and where a document begins."""
    docs = {store.sentence_ends(d)[0] for d in range(store.num_documents)}
    return set(store.sentence_starts.tolist()), docs


@pytest.mark.parametrize("packing", ["full-sentences", "doc-sentences"])
def test_packed_inputs_are_full_sentences_of_contiguous_text_and_lose_nothing(packing):
    data, store = dataset(packing)
    sentences, documents = boundaries(store)
    sep = data.vocab.sep_token_id
    seen, crossings, short = [], 0, 0
    for inst in data.instances(0):
        assert 1 <= len(inst.tokens_a) <= LENGTH - 2 and not inst.tokens_b and not inst.is_random_next
        parts = pieces(inst.tokens_a, inst.separators_a, sep)
        for part in parts:
            assert part == list(range(part[0], part[0] + len(part)))          # contiguous, in order
            assert part[0] in sentences and part[-1] + 1 in sentences        # whole sentences
        for before, after in zip(parts[:-1], parts[1:]):                    # a separator only between documents,
            assert after[0] in documents and after[0] == before[-1] + 1      # the next document's start
        crossings += len(parts) - 1
        short += len(inst.tokens_a) < LENGTH - 2 - 12
        seen += [t for part in parts for t in part]
    assert sorted(seen) == list(range(store.num_tokens))                     # every token once
    if packing == "full-sentences":
        assert crossings > 0
    else:
        assert crossings == 0 and short > 0                                  # a document's end ends an input


def test_full_sentences_crosses_documents_and_doc_sentences_never_does():
    for packing, crosses in (("full-sentences", True), ("doc-sentences", False)):
        data, store = dataset(packing)
        starts = np.asarray([store.sentence_ends(d)[0] for d in range(store.num_documents)])
        spans = {len(set(np.searchsorted(starts, [t - BASE for t in inst.tokens_a if t != data.vocab.sep_token_id],
                                         side="right").tolist())) for inst in data.instances(0)}
        assert (max(spans) > 1) == crosses, packing


def test_a_packed_batch_has_no_pairs_and_its_separators_are_special_tokens():
    data, _ = dataset("full-sentences")
    batches = list(data.epoch_batches(0))
    assert any(inst.separators_a for inst in data.instances(0))
    found = 0
    for batch in batches:
        assert batch.input_ids.shape[1] <= LENGTH and not batch.has_nsp
        assert (batch.next_sentence_label == IGNORE_INDEX).all() and (batch.token_type_ids == 0).all()
        inner = (batch.input_ids == data.vocab.sep_token_id) & (batch.attention_mask == 1)      # (B, S)
        last = batch.attention_mask.sum(1) - 1                                                  # (B,)
        inner[torch.arange(len(last)), last] = False                                           # the final [SEP]
        found += int(inner.sum())
        assert (batch.special_tokens_mask[inner] == 1).all() and (batch.labels[inner] == IGNORE_INDEX).all()
    assert found > 0


def test_static_masks_of_packed_inputs_follow_the_corpus_offsets():
    data, _ = dataset("full-sentences", static=True)

    def chosen(epoch: int) -> set[int]:           # the corpus tokens chosen in an epoch (an id is its offset)
        found = set()
        for batch in data.epoch_batches(epoch):
            picked = batch.labels != IGNORE_INDEX                                   # (B, S)
            assert (batch.special_tokens_mask[picked] == 0).all()                   # never a separator
            found |= set(batch.labels[picked].tolist())
        return found
    assert chosen(0) and chosen(0) == chosen(1)   # the same tokens, whichever input and batch they fall in


def test_sentence_pair_segments_are_single_sentences_of_one_or_two_documents():
    data, store = dataset("sentence-pair", nsp=True)
    sentences, _ = boundaries(store)
    starts = np.asarray([store.sentence_ends(d)[0] for d in range(store.num_documents)])
    labels = []
    for inst in data.instances(0):
        a, b = [t - BASE for t in inst.tokens_a], [t - BASE for t in inst.tokens_b]
        assert a and b and len(a) + len(b) <= LENGTH - 3
        for part in (a, b):                        # inside one sentence (cut to fit, never two sentences)
            assert not any(t in sentences for t in part[1:])
        same_doc = np.searchsorted(starts, a[0], side="right") == np.searchsorted(starts, b[0], side="right")
        assert same_doc != inst.is_random_next
        labels.append(inst.is_random_next)
    assert 0.3 < np.mean(labels) < 0.8


@pytest.mark.parametrize("packing, nsp, words", [
    ("full-sentences", True, "turn next-sentence prediction off"),
    ("doc-sentences", True, "turn next-sentence prediction off"),
    ("sentence-pair", False, "keep next-sentence prediction on"),
])
def test_incompatible_combinations_are_refused_with_a_sentence(packing, nsp, words):
    with pytest.raises(ValueError, match=words):
        dataset(packing, nsp=nsp)


def test_bad_values_and_sentence_order_with_packing_are_refused():
    with pytest.raises(ValueError, match="packing must be one of segment-pair"):
        PretrainingObjective(packing="full-sentence")
    with pytest.raises(ValueError, match="pair_task sop"):
        PretrainingObjective(pair_task="sop", packing="full-sentences")


def test_the_default_plans_and_hashes_exactly_as_before():
    store, tokenizer = corpus()
    default = PretrainingDataset(store, tokenizer, LENGTH, 8, nsp=True, seed=3)
    explicit = PretrainingDataset(store, tokenizer, LENGTH, 8, nsp=True, seed=3,
                                  objective=PretrainingObjective(packing="segment-pair"))
    assert PretrainingObjective(packing="segment-pair").is_default
    assert default.fingerprint() == explicit.fingerprint() != dataset("full-sentences")[0].fingerprint()
    rows = plan_rows(store, default.pool, range(len(default.pool)), LENGTH, 0.1, True, random.Random(5))
    assert rows.shape[1] == 5                                         # BERT's segment-pair rows
    for mine, theirs in zip(default.epoch_batches(0), explicit.epoch_batches(0)):
        assert torch.equal(mine.input_ids, theirs.input_ids) and torch.equal(mine.labels, theirs.labels)
