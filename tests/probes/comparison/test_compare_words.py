"""Two models whose tokenizers differ, compared by words (engine/probes/comparison/compare.py, word_alignment.py,
word_fillers.py): one model through two tokenizations is the same at every layer, a word's vector is the mean
of its pieces' hidden states (transformers' on the same weights), the words are those both tokenizations
share, layers pair up by relative depth, fill-mask is compared by the word each entry writes (read back by
transformers' own tokenizer), and a text whose words cannot be aligned is one sentence."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import copy

import numpy as np
import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load
from engine.model.loaded_model import LoadedModel
from engine.probes.comparison.cka import debiased_linear_cka
from engine.probes.comparison.compare import MaskComparison, compare_models, hidden_states
from engine.probes.comparison.word_alignment import align_words, original_offsets
from engine.text.encoding import Encoding
from engine.text.tokenizer import WordPieceTokenizer
from support.saved_families import save_family_model
from support.probing_helpers import tiny_model
from support.reference import hf_copy
from tests.conftest import VOCAB

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "the cat [MASK] on the mat ."
SPLIT = "the cat purred on the mat, don't you?"         # the tiny WordPiece vocabulary: p ##u ##r ##r ##ed
ALIGNED = {   # SPLIT's words by hand: a smallest stretch that is whole words in both pre-tokenizations
    "roberta": ["the", "cat", "purred", "on", "the", "mat", ",", "don", "'t", "you", "?"],     # 't: a contraction
    "xlmr": ["the", "cat", "purred", "on", "the", "mat,", "don't", "you?"],                 # split at spaces only
}


def bert(tokenizer: WordPieceTokenizer, seed: int = 1) -> LoadedModel:
    model = tiny_model(seed, heads=("mlm",))
    return LoadedModel(model, tokenizer, model.config, f"bert-{seed}")


@pytest.fixture(scope="module")
def roberta(tmp_path_factory) -> tuple[LoadedModel, object, object]:
    """A 4-layer RoBERTa (engine-loaded), its transformers model and its transformers tokenizer."""
    folder = save_family_model("roberta", tmp_path_factory.mktemp("roberta"), layers=4, positions=66,
                               norms_drawn=False)
    return (load(folder), transformers.RobertaForMaskedLM.from_pretrained(folder).eval(),
            transformers.AutoTokenizer.from_pretrained(folder))


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory) -> LoadedModel:
    return load(save_family_model("xlm-roberta", tmp_path_factory.mktemp("xlmr"), layers=2, positions=66,
                                  norms_drawn=False))


def reversed_twin(loaded: LoadedModel) -> LoadedModel:
    """The same network read through a second tokenization: the vocabulary's ids reversed, and the embedding
    rows and the masked-LM bias permuted to match (the decoder is tied to the embeddings)."""
    size = len(VOCAB)
    tokenizer = WordPieceTokenizer.from_vocab({token: size - 1 - i for i, token in enumerate(VOCAB)})
    model = copy.deepcopy(loaded.model)
    order = torch.arange(model.config.vocab_size)
    order[:size] = order[:size].flip(0)                                    # new id -> old id
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.copy_(loaded.model.bert.embeddings.word_embeddings.weight[order])
        model.cls.predictions.bias.copy_(loaded.model.cls.predictions.bias[order])
    return LoadedModel(model, tokenizer, model.config, "reversed twin")


def test_one_model_through_two_tokenizations_is_the_same_by_words(tiny_tokenizer) -> None:
    a = bert(tiny_tokenizer)
    twin = reversed_twin(a)
    assert a.tokenizer.encode(SPLIT).input_ids != twin.tokenizer.encode(SPLIT).input_ids
    comparison = compare_models(a, twin, SPLIT.replace("purred", "[MASK]"), top_k=4)
    assert comparison.alignment is not None and comparison.tokens == comparison.alignment.texts
    np.testing.assert_allclose(comparison.same_depth_cka, 1.0, atol=1e-6)
    np.testing.assert_allclose(comparison.cosine, 1.0, atol=1e-6)
    np.testing.assert_allclose(comparison.attention_maps(1, 2)[2], 0.0, atol=1e-6)
    [mask] = comparison.masks
    assert comparison.tokens[mask.word] == "[MASK]" and mask.position_a == mask.position_b == 3
    for filler in mask.fillers:
        assert filler.prob_a == pytest.approx(filler.prob_b, abs=1e-6) and filler.rank_a == filler.rank_b


def test_a_word_vector_is_the_mean_of_its_pieces_hidden_states(tiny_tokenizer) -> None:
    a = bert(tiny_tokenizer)
    comparison = compare_models(a, a, SPLIT, by_words=True)                    # one tokenizer, forced by words
    alignment = comparison.alignment
    assert alignment.texts == ["the", "cat", "purred", "on", "the", "mat", ",", "don", "'", "t", "you", "?"]
    encoding = a.tokenizer.encode(SPLIT)
    purred = alignment.words[2]
    assert [encoding.tokens[p] for p in purred.pieces_a] == ["p", "##u", "##r", "##r", "##ed"]
    assert purred.pieces_a == purred.pieces_b
    np.testing.assert_allclose(comparison.same_depth_cka, 1.0, atol=1e-9)
    with torch.no_grad():
        reference = hf_copy(a.model, transformers.BertForMaskedLM)(torch.tensor([encoding.input_ids]),
                                                                  output_hidden_states=True).hidden_states
    reference = torch.stack([h[0] for h in reference])                                    # (L+1, S, H)
    pooled = alignment.pool_states(hidden_states(a, SPLIT)[1], "a")                      # (L+1, W, H)
    assert pooled.shape == (3, len(alignment.words), 32)
    for w, word in enumerate(alignment.words):
        torch.testing.assert_close(pooled[:, w], reference[:, list(word.pieces_a)].mean(1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", ["roberta", "xlmr"])
def test_the_words_are_those_both_tokenizations_share(tiny_tokenizer, family, request) -> None:
    other = request.getfixturevalue(family)
    other = other[0] if isinstance(other, tuple) else other
    comparison = compare_models(bert(tiny_tokenizer), other, SPLIT)
    alignment = comparison.alignment
    assert alignment.texts == ALIGNED[family] == comparison.tokens
    encodings = {"a": tiny_tokenizer.encode(SPLIT), "b": other.tokenizer.encode(SPLIT)}
    assert (alignment.num_pieces_a, alignment.num_pieces_b) == (len(encodings["a"].input_ids),
                                                                len(encodings["b"].input_ids))
    for side, encoding in encodings.items():
        listed = [p for word in alignment.words for p in word.pieces(side)]
        assert len(listed) == len(set(listed))                                  # a piece in one word at most
        for word in alignment.words:                                            # each piece inside its word
            assert all(word.start <= encoding.offsets[p][0] and encoding.offsets[p][1] <= word.end
                       for p in word.pieces(side))
        covering = {p for p, (start, end) in enumerate(encoding.offsets) if SPLIT[start:end].strip()}
        assert covering <= set(listed)                                          # every piece with characters


def test_a_text_pairs_words_are_aligned_within_each_text(tiny_tokenizer, xlmr) -> None:
    alignment = compare_models(bert(tiny_tokenizer), xlmr, "the cat [MASK] .", "the dog ran .").alignment
    assert [(w.text, w.sequence) for w in alignment.words] == [("the", 0), ("cat", 0), ("[MASK]", 0), (".", 0),
                                                               ("the", 1), ("dog", 1), ("ran", 1), (".", 1)]
    encoding = xlmr.tokenizer.encode("the cat <mask> .", "the dog ran .")
    dog = [p for p, (sequence, (start, end)) in enumerate(zip(encoding.sequence_ids, encoding.offsets))
           if sequence == 1 and 4 <= start and end <= 7]                       # "dog": characters 4..7 of the pair
    assert alignment.words[5].pieces_b == tuple(dog) and len(dog) > 1


def hsic_cka(x: np.ndarray, y: np.ndarray) -> float:
    """CKA from its definition: HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), K = XXᵀ, L = YYᵀ."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l_ = x @ x.T, y @ y.T
    return float(np.trace(k @ h @ l_ @ h) / np.sqrt(np.trace(k @ h @ k @ h) * np.trace(l_ @ h @ l_ @ h)))


def test_layers_pair_up_by_relative_depth_and_cka_runs_over_words(tiny_tokenizer, roberta) -> None:
    a, (b, hf_b, _) = bert(tiny_tokenizer), roberta
    comparison = compare_models(a, b, SPLIT)                                    # 2 layers against 4
    assert comparison.cka.shape == (3, 5) and comparison.same_depth_cka is None and comparison.cosine is None
    assert comparison.layer_pairs == [(0, 0), (1, 2), (2, 4)]
    np.testing.assert_allclose(comparison.matched_cka, [comparison.cka[i, j] for i, j in comparison.layer_pairs])
    assert compare_models(b, a, SPLIT).layer_pairs == [(0, 0), (1, 1), (2, 1), (3, 2), (4, 2)]   # 0.5, 1.5 up
    alignment = comparison.alignment
    with torch.no_grad():
        states_b = hf_b.roberta(torch.tensor([b.tokenizer.encode(SPLIT).input_ids]),
                                output_hidden_states=True).hidden_states                # L+1 of (1, S_b, H)
    words_a = alignment.pool_states(hidden_states(a, SPLIT)[1], "a").double().numpy()  # (3, W, 32)
    words_b = alignment.pool_states(hidden_states(b, SPLIT)[1], "b").double().numpy()  # (5, W, 32)
    for j, layer in enumerate(states_b):                    # B's word vectors: the mean of transformers' pieces
        mean = np.stack([layer[0, list(word.pieces_b)].mean(0).double().numpy() for word in alignment.words])
        np.testing.assert_allclose(words_b[j], mean, rtol=0, atol=1e-5)
        for i in range(3):                                  # CKA over the words, as its kernel definition
            assert comparison.plain_cka[i, j] == pytest.approx(hsic_cka(words_a[i], words_b[j]), abs=1e-9)
            assert comparison.cka[i, j] == pytest.approx(
                debiased_linear_cka(torch.tensor(words_a[i]), torch.tensor(words_b[j])), abs=1e-9)


def written(hf_tokenizer, token_id: int) -> str:
    """The word an entry writes, as transformers' tokenizer reads it back ("" for a special token, a piece of
    spaces or control characters, or only part of a character: transformers writes those as U+FFFD)."""
    if token_id in hf_tokenizer.all_special_ids:
        return ""
    word = hf_tokenizer.convert_tokens_to_string([hf_tokenizer.convert_ids_to_tokens(token_id)]).strip().lower()
    return "" if "\ufffd" in word or not word.isprintable() else word


def word_distribution(probs: torch.Tensor, words: list[str]) -> dict[str, float]:
    """Each word's probability: the sum over the entries that write it (``words[id]``, "" for none)."""
    found: dict[str, float] = {}
    for token_id, word in enumerate(words):
        if word:
            found[word] = found.get(word, 0.0) + float(probs[token_id])
    return found


def assert_scored(fillers: list, side: str, distribution: dict[str, float], top_k: int) -> None:
    """Each filler's probability and rank on ``side`` are those of the reference distribution over words."""
    ranked = sorted(distribution, key=distribution.get, reverse=True)
    assert set(ranked[:top_k]) <= {f.word for f in fillers}                       # the model's own top k listed
    for filler in fillers:
        prob, rank = getattr(filler, f"prob_{side}"), getattr(filler, f"rank_{side}")
        if filler.word not in distribution:
            assert prob == 0.0 and rank is None                                  # no entry writes it
            continue
        assert prob == pytest.approx(distribution[filler.word], abs=1e-5)
        assert rank == sum(p > distribution[filler.word] + 1e-9 for p in distribution.values()) + 1


def test_fill_mask_is_compared_by_the_words_the_entries_write(tiny_tokenizer, roberta) -> None:
    a, (b, hf_b, hf_tokenizer) = bert(tiny_tokenizer), roberta
    comparison = compare_models(a, b, TEXT, top_k=4)
    assert comparison.alignment.texts == ["the", "cat", "[MASK]", "on", "the", "mat", "."]
    [mask] = comparison.masks
    assert comparison.tokens[mask.word] == "[MASK]" and mask.position_a == 3
    ids_b = hf_tokenizer("the cat <mask> on the mat .")["input_ids"]
    assert mask.position_b == ids_b.index(hf_tokenizer.mask_token_id)
    with torch.no_grad():
        probs_a = hf_copy(a.model, transformers.BertForMaskedLM)(
            torch.tensor([a.tokenizer.encode(TEXT).input_ids])).logits[0, 3].softmax(-1)   # (V_a,)
        probs_b = hf_b(torch.tensor([ids_b])).logits[0, mask.position_b].softmax(-1)      # (V_b,)
    specials_a = a.tokenizer.special_ids()
    words_a = [VOCAB[i] if i < len(VOCAB) and i not in specials_a else "" for i in range(len(probs_a))]
    words_b = [written(hf_tokenizer, i) for i in range(len(probs_b))]
    assert_scored(mask.fillers, "a", word_distribution(probs_a, words_a), 4)
    assert_scored(mask.fillers, "b", word_distribution(probs_b, words_b), 4)
    assert [f.rank_a for f in mask.fillers[:4]] == [1, 2, 3, 4]                     # A's top 4 first, in order
    assert any(f.rank_a and f.rank_b for f in mask.fillers)                       # words both vocabularies write
    assert all(f.rank_b is None for f in mask.fillers if f.word.startswith("##"))   # continuations: BERT's only
    for filler in mask.fillers:
        assert filler.change == pytest.approx(filler.prob_b - filler.prob_a) and not filler.word.startswith("▁")


def test_the_same_tokenizer_is_still_compared_by_tokens(tiny_tokenizer) -> None:
    a, b = bert(tiny_tokenizer, 1), bert(tiny_tokenizer, 2)
    comparison = compare_models(a, b, TEXT, top_k=3)
    assert comparison.alignment is None and comparison.tokens == comparison.attention_a.tokens
    assert all(isinstance(m, MaskComparison) for m in comparison.masks)
    assert comparison.cka.shape == (3, 3) and comparison.layer_pairs == [(0, 0), (1, 1), (2, 2)]
    np.testing.assert_allclose(comparison.matched_cka, comparison.same_depth_cka)
    forced = compare_models(a, b, TEXT, top_k=3, by_words=False)
    np.testing.assert_array_equal(forced.cka, comparison.cka)
    assert forced.masks == comparison.masks
    with pytest.raises(ValueError, match="read this text into different tokens .* share a tokenizer"):
        compare_models(a, reversed_twin(a), TEXT, by_words=False)


def test_words_that_cannot_be_aligned_are_one_sentence(tiny_tokenizer, roberta) -> None:
    a, b = bert(tiny_tokenizer), roberta[0]
    with pytest.raises(ValueError, match=r"model A's tokenizer drops '\u0301' \(no piece covers it\)"):
        compare_models(a, b, "the cat \u0301 sat")                   # BERT strips a lone accent; bytes keep it
    with pytest.raises(ValueError, match=r"model A reads '\[CLS\]' as a special token, which is no word"):
        compare_models(a, b, "the [CLS] cat")
    with pytest.raises(ValueError, match="no words both models read"):
        compare_models(a, reversed_twin(a), "[CLS] [SEP]")
    with pytest.raises(ValueError, match="model A reads only the first 64 tokens of this text"):
        compare_models(a, b, "purred " * 14)                         # 5 pieces a word in A, 3 in B
    assert compare_models(a, b, "the cat sat").alignment.texts == ["the", "cat", "sat"]


def test_a_mask_written_as_a_longer_token_maps_back_to_the_typed_mask() -> None:
    """'a [MASK] b' encoded as 'a <longmask> b': every span lands on the text as typed."""
    encoding = Encoding(input_ids=[0, 1, 2, 3, 4], token_type_ids=[0] * 5, attention_mask=[1] * 5,
                        tokens=["<s>", "a", "<longmask>", "b", "</s>"],
                        offsets=[(0, 0), (0, 1), (2, 12), (13, 14), (0, 0)],
                        special_tokens_mask=[1, 0, 0, 0, 1], word_ids=[None, 0, 1, 2, None],
                        sequence_ids=[None, 0, 0, 0, None], truncated=False, num_truncated_tokens=0)
    text = "a [MASK] b"
    assert original_offsets(encoding, [text], "<longmask>", "[MASK]") == [None, (0, 1), (2, 8), (9, 10), None]
    plain = copy.deepcopy(encoding)
    plain.offsets = [(0, 0), (0, 1), (2, 8), (9, 10), (0, 0)]
    alignment = align_words(text, None, encoding, plain, mask_a="<longmask>")
    assert alignment.texts == ["a", "[MASK]", "b"]
    assert alignment.words[1].pieces_a == alignment.words[1].pieces_b == (2,)
