"""The bundled *two senses* corpus (assets/corpora/two-senses.txt) shows what the neighbours section promises: on
the bundled default model, at the section's default layer, "bank" by a river finds river sentences and "bank"
that lends finds money sentences (the built-in Shakespeare has no money banks)."""
from __future__ import annotations

import re

import pytest

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR, load_directory
from engine.model.loaded_model import LoadedModel
from engine.probes.representations.neighbours import build_index, nearest
from explorer.embeddings import corpus_neighbours as cn
from engine.text.documents import read_documents

pytestmark = pytest.mark.usefixtures("one_thread")
RIVER_WORDS = {"river", "stream", "creek", "water", "lake", "pond", "canal", "brook"}
MONEY_WORDS = {"money", "loan", "loans", "account", "accounts", "cash", "savings", "interest", "salary", "mortgage"}
QUERIES = [(cn.QUERY_EXAMPLES[0], "river"), (cn.QUERY_EXAMPLES[1], "money"),          # the section's examples
           ("We had a picnic on the bank of the river.", "river"),                   # and the browser test's
           ("I need to withdraw cash from the bank.", "money")]


def bank_senses() -> dict[str, str]:
    """Each sentence of the corpus -> "river" or "money" where its paragraph (document) has "bank" in one sense,
    judged by the paragraph's words; "other" for the paragraphs without "bank"."""
    senses = {}
    for document in read_documents(cn.TWO_SENSES_FILE):
        words = set(re.findall(r"[a-z]+", " ".join(document).lower()))
        river, money = bool(words & RIVER_WORDS), bool(words & MONEY_WORDS)
        has_bank = bool(words & {"bank", "banks"})
        assert not has_bank or river != money, f"a paragraph mixes the senses of bank: {document[0]!r}"
        for sentence in document:
            senses[sentence] = ("river" if river else "money") if has_bank else "other"
    return senses


def test_the_corpus_is_a_few_hundred_sentences_with_bank_in_both_senses() -> None:
    sentences = cn.two_senses_sentences()
    assert 300 <= len(sentences) <= 400 and len(set(sentences)) == len(sentences)
    senses = bank_senses()
    with_bank = [s for s in sentences if re.search(r"\bbank\b", s.lower())]
    assert sum(senses[s] == "river" for s in with_bank) >= 50 and sum(senses[s] == "money" for s in with_bank) >= 50
    for word in ("bat", "bark", "spring", "pitch", "match", "light"):                # other words with two senses
        assert sum(bool(re.search(rf"\b{word}\b", s.lower())) for s in sentences) >= 8, word
    assert cn.corpus_sentences(cn.TWO_SENSES, None, 10) == list(sentences[:10])
    assert cn.SOURCES[0][1] == cn.TWO_SENSES                                          # offered first


@pytest.fixture(scope="module")
def default_model() -> LoadedModel:
    loaded = load_directory(DEFAULT_MODEL_DIR)
    loaded.model.eval()
    return loaded


@pytest.mark.slow
def test_bank_by_a_river_and_bank_that_lends_find_their_own_sense(default_model) -> None:
    senses = bank_senses()
    index = build_index(default_model, cn.corpus_sentences(cn.TWO_SENSES, None, cn.DEFAULT_SENTENCES), cn.DEFAULT_LAYER)
    for query, sense in QUERIES:
        tokens = default_model.tokenizer.encode(query).tokens
        result = nearest(index, default_model, query, tokens.index("bank"), k=10)
        found = [senses[n.text] for n in result.neighbours]
        assert found[:2] == [sense, sense], (query, [(n.text, round(n.score, 3)) for n in result.neighbours])
        assert found.count(sense) >= 8, (query, found)                    # measured: 10 of 10 at layer 4
        shown = cn.neighbours_html(result)
        assert shown.count("<li>") == 10 and f"at layer {cn.DEFAULT_LAYER}" in shown
