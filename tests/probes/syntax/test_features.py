"""Word-level attention and word vectors: the piece-to-word rule on hand-computed maps, and the numbers equal to
an independent run through ``transformers`` (eager attention) on the same random weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.features import sentence_features, word_attention
from support.reference import hf_copy, randomize_

pytestmark = pytest.mark.usefixtures("one_thread")


def sentence(*words: str) -> DependencySentence:
    """A sentence whose words all hang off the first (the heads do not matter here)."""
    n = len(words)
    return DependencySentence(tuple(words), (0,) + (1,) * (n - 1), ("root",) + ("dep",) * (n - 1), ("X",) * n)


def test_to_a_word_sums_its_pieces_from_a_word_averages_them() -> None:
    """[CLS] a1 a2 b [SEP]: word a has pieces 1 and 2, word b piece 3; [CLS] and [SEP] are dropped."""
    piece = np.array([[.1, .2, .3, .4, .0],
                      [.0, .5, .1, .2, .2],      # a1
                      [.2, .1, .3, .3, .1],      # a2
                      [.3, .2, .2, .1, .2],      # b
                      [.2, .2, .2, .2, .2]], dtype=np.float32)
    words = word_attention(piece, [None, 0, 0, 1, None], 2)
    expected = np.array([[((.5 + .1) + (.1 + .3)) / 2, (.2 + .3) / 2],     # from a: mean of rows a1, a2
                         [.2 + .2, .1]])                                     # from b: to a = a1 + a2
    np.testing.assert_allclose(words, expected, atol=1e-6)
    stacked = word_attention(np.stack([piece, piece]), [None, 0, 0, 1, None], 2)   # (..., S, S) broadcasts
    np.testing.assert_allclose(stacked, np.stack([expected, expected]), atol=1e-6)


def test_a_word_with_no_piece_is_an_error() -> None:
    with pytest.raises(ValueError, match="word 1 has no piece"):
        word_attention(np.eye(3, dtype=np.float32), [None, 0, None], 2)


@pytest.fixture(scope="module")
def loaded(make_config, tiny_tokenizer) -> LoadedModel:
    model = randomize_(BertWithHeads(make_config(), heads=("mlm", "nsp")), 3, scale=0.3).eval()
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny seed 3")


SENTENCES = [sentence("the", "cats", "sat", "on", "the", "mat", "."),
             sentence("she", "played", "walking", "the", "dog's", "ball", "!"),   # "dog's": 3 pieces, one word
             sentence("what", "is", "bert", "?"),
             sentence("Red", "birds", "sang", "in", "a", "big", "tree", ",", "and", "the", "cat", "ran")]


def _independent(hf, tokenizer, words: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """transformers' eager attention and hidden states for one sentence, aggregated by explicit loops."""
    encoding = tokenizer(list(words), is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        out = hf.bert(**encoding, output_attentions=True, output_hidden_states=True)
    maps = torch.stack([a[0] for a in out.attentions]).double().numpy()             # (L, nh, S, S)
    hidden = torch.stack([h[0] for h in out.hidden_states]).double().numpy()        # (L + 1, S, H)
    owner = encoding.word_ids()
    pieces = [[s for s, w in enumerate(owner) if w == i] for i in range(len(words))]
    n = len(words)
    attention = np.zeros(maps.shape[:2] + (n, n))
    for i in range(n):
        for j in range(n):
            attention[..., i, j] = sum(sum(maps[..., p, q] for q in pieces[j]) for p in pieces[i]) / len(pieces[i])
    vectors = np.stack([sum(hidden[:, p] for p in pieces[i]) / len(pieces[i]) for i in range(n)], axis=1)
    return attention, vectors


def test_word_attention_and_vectors_equal_transformers(loaded, tmp_path) -> None:
    """Batched and padded here, one sentence at a time there; the tokenizer there is transformers' own."""
    hf = hf_copy(loaded.model, transformers.BertForPreTraining)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(loaded.tokenizer.backend.id_to_token(i) for i in range(loaded.tokenizer.vocab_size))
                     + "\n", encoding="utf-8")
    hf_tokenizer = transformers.BertTokenizerFast(vocab=str(vocab), do_lower_case=True)
    found = sentence_features(loaded, SENTENCES, batch_size=3)
    assert found.sentences == SENTENCES and not found.skipped
    assert (found.num_layers, found.num_heads) == (2, 4)
    for s, attention, vectors in zip(SENTENCES, found.attention, found.vectors):
        theirs, their_vectors = _independent(hf, hf_tokenizer, s.words)
        assert attention.shape == (2, 4, len(s), len(s)) and attention.dtype == np.float32
        assert vectors.shape == (3, len(s), 32)
        np.testing.assert_allclose(attention, theirs, atol=2e-5, rtol=0)
        np.testing.assert_allclose(vectors, their_vectors, atol=5e-5, rtol=0)
        assert (attention.sum(-1) <= 1 + 1e-5).all()             # [CLS] and [SEP] dropped: rows sum to at most 1


def test_sentences_the_model_cannot_read_are_skipped_and_named(loaded) -> None:
    long = sentence(*(["the"] * 70))                               # 72 pieces, the tiny model has 64 positions
    nothing = sentence("the", "\u200b", "cat")                     # a zero-width space has no piece
    found = sentence_features(loaded, [SENTENCES[0], long, nothing])
    assert found.sentences == [SENTENCES[0]]
    assert found.skipped[0][0] == 1 and "more than the model's 64 positions" in found.skipped[0][1]
    assert found.skipped[1][0] == 2 and "word 2" in found.skipped[1][1] and "has no piece" in found.skipped[1][1]
    with pytest.raises(ValueError, match="no sentences"):
        sentence_features(loaded, [])
