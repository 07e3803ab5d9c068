"""Vocabulary training (issue 38, item 1): one set of tokens gets the same ids however the trainer numbered
them, and fixing the ids changes no tokenization."""
from __future__ import annotations

from engine.text.builtin_corpus import builtin_corpus
from engine.text.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from engine.text.vocabulary import canonical_ids

TEXTS = [" ".join(document) for document in builtin_corpus("shakespeare")][:120]


def test_a_trained_vocabulary_is_in_the_fixed_order():
    vocab = WordPieceTokenizer.train(iter(TEXTS), vocab_size=1500).get_vocab()
    assert canonical_ids(vocab) == vocab
    assert [token for token, _ in sorted(vocab.items(), key=lambda kv: kv[1])][:5] == list(SPECIAL_TOKENS)


def test_the_fixed_order_changes_no_tokenization():
    trained = WordPieceTokenizer.train(iter(TEXTS), vocab_size=1500)
    shuffled = {token: index for index, token in enumerate(sorted(trained.get_vocab(), key=lambda t: t[::-1]))}
    other = WordPieceTokenizer.from_vocab(shuffled)
    for text in TEXTS[:30] + ["Unwanted pieces, punctuation!", "naïve 東京"]:
        assert trained.backend.encode(text).tokens == other.backend.encode(text).tokens
    assert canonical_ids(shuffled) == trained.get_vocab()


def test_the_order_is_specials_characters_continuations_then_pieces():
    vocab = {"##ab": 0, "b": 1, "[MASK]": 2, "ab": 3, "##a": 4, "[PAD]": 5, "a": 6, "[UNK]": 7, "[CLS]": 8, "[SEP]": 9}
    assert list(canonical_ids(vocab)) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a", "ab", "##ab"]
