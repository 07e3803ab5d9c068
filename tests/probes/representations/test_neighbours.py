"""Nearest contextual neighbours (engine/probes/representations/neighbours.py): the index holds transformers'
hidden states of each sentence (padding in a batch changes nothing), the search is an exact cosine top-k, a token
finds itself first, and on the bundled model "bank" by a river and "bank" for money find their own kind of sentences."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load_directory
from engine.model.loaded_model import LoadedModel
from engine.probes.representations.neighbours import MAX_SENTENCES, build_index, nearest
from support.probing_helpers import tiny_model
from support.reference import hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")
CORPUS = ["the cat sat on the mat .", "a dog ran in the house and the cat ran too .", "it was red .",
          "the big bird was blue and the small bird was red ."]
RIVER = ["We walked along the river bank and watched the ducks.", "The boat drifted toward the muddy bank of the stream.",
         "Fish hide under the grassy bank where the water is slow.", "She sat on the bank of the lake fishing all day."]
MONEY = ["He deposited his salary at the bank on Monday.", "The bank approved the loan for the new house.",
         "She opened a savings account at the local bank.", "The bank raised its interest rates again."]


@pytest.fixture(scope="module")
def tiny(tiny_tokenizer) -> LoadedModel:
    model = tiny_model(1, heads=("mlm",))
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny")


def test_the_index_holds_transformers_hidden_states_of_each_sentence_alone(tiny) -> None:
    index = build_index(tiny, CORPUS, layer=1, batch_size=3)            # a padded batch, then a single one
    hf = hf_copy(tiny.model, transformers.BertForMaskedLM)
    row = 0
    for s, sentence in enumerate(CORPUS):
        encoding = tiny.tokenizer.encode(sentence)
        with torch.no_grad():
            states = hf(torch.tensor([encoding.input_ids]), output_hidden_states=True).hidden_states[1][0]   # (S, H)
        pieces = [i for i, special in enumerate(encoding.special_tokens_mask) if not special]
        expected = torch.nn.functional.normalize(states[pieces], dim=-1)
        torch.testing.assert_close(index.vectors[row:row + len(pieces)], expected, rtol=0, atol=1e-5)
        assert list(index.sentence_of[row:row + len(pieces)]) == [s] * len(pieces)
        assert list(index.position_of[row:row + len(pieces)]) == pieces
        for at, (start, end) in zip(pieces, index.span_of[row:row + len(pieces)]):
            assert sentence[start:end] == encoding.tokens[at].removeprefix("##")
        row += len(pieces)
    assert row == len(index)


def test_the_search_is_an_exact_cosine_top_k_and_a_token_finds_itself_first(tiny) -> None:
    index = build_index(tiny, CORPUS, layer=2)
    query = "a dog ran in the house and the cat ran too ."
    tokens = tiny.tokenizer.encode(query).tokens
    position = tokens.index("house")
    result = nearest(index, tiny, query, position, k=6)
    first = result.neighbours[0]
    assert (first.sentence, first.position, first.token) == (1, position, "house") and first.score == pytest.approx(1.0)
    vectors = index.vectors.numpy()
    scores = vectors @ vectors[int(np.flatnonzero((index.sentence_of == 1) & (index.position_of == position))[0])]
    expected = np.argsort(-scores, kind="stable")[:6]
    assert [n.score for n in result.neighbours] == pytest.approx(scores[expected].tolist(), abs=1e-6)
    assert result.token == "house" and result.layer == 2 and len(result.neighbours) == 6
    assert all(a.score >= b.score for a, b in zip(result.neighbours, result.neighbours[1:]))


def test_bank_by_a_river_and_bank_for_money_find_their_own_sentences() -> None:
    loaded = load_directory(DEFAULT_MODEL_DIR)
    loaded.model.eval()
    index = build_index(loaded, RIVER + MONEY, layer=4)
    for query, own in (("They had a picnic on the bank of the river.", range(0, 4)),
                       ("I need to withdraw cash from the bank.", range(4, 8))):
        tokens = loaded.tokenizer.encode(query).tokens
        found = nearest(index, loaded, query, tokens.index("bank"), k=4).neighbours
        assert all(n.token == "bank" for n in found), found
        assert {n.sentence for n in found} == set(own), (query, [(n.sentence, n.score) for n in found])


@pytest.mark.parametrize("call,message", [
    (lambda m: build_index(m, ["  ", ""], 1), "no sentences to index"),
    (lambda m: build_index(m, ["a ."] * (MAX_SENTENCES + 1), 1), "at most 5,000"),
    (lambda m: build_index(m, CORPUS, 3), r"layer must be 0 \(the embeddings\) to 2"),
    (lambda m: build_index(m, CORPUS, True), "layer must be"),
    (lambda m: nearest(build_index(m, CORPUS, 1), m, "the cat .", 9), "token position must be 0 to 4"),
    (lambda m: nearest(build_index(m, CORPUS, 1), m, "the cat .", 1, k=0), "k must be 1 to 100"),
    (lambda m: nearest(build_index(m, CORPUS, 1), m, "   ", 1), "text is empty"),
])
def test_bad_input_says_what_is_wrong(tiny, call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call(tiny)


def test_an_index_answers_only_for_its_own_model(tiny, tiny_tokenizer) -> None:
    other_model = tiny_model(2, heads=("mlm",))
    other = LoadedModel(other_model, tiny_tokenizer, other_model.config, "other")
    with pytest.raises(ValueError, match="the index was built with tiny, not other"):
        nearest(build_index(tiny, CORPUS, 1), other, "the cat .", 1)
