"""Two models on one input (engine/probes/comparison/compare.py): plain linear CKA against its kernel (HSIC)
definition and its invariances (the debiased one: test_cka.py), the input's CKA both ways, hidden states and mask
probabilities against transformers' BertForMaskedLM on the same weights, what changes when one layer changes, and the refusals (other tokenizer, other vocabulary)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import transformers

from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.probes.attention.maps import attention
from engine.probes.comparison.cka import debiased_linear_cka, linear_cka
from engine.probes.comparison.compare import compare_models, hidden_states
from engine.text.tokenizer import WordPieceTokenizer
from support.probing_helpers import tiny_model
from support.reference import hf_copy
from tests.conftest import VOCAB, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "the cat [MASK] on the mat and the dog ran ."


def hsic_cka(x: np.ndarray, y: np.ndarray) -> float:
    """CKA from its definition: HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), K = XXᵀ, L = YYᵀ, HSIC = tr(KHLH)."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l_ = x @ x.T, y @ y.T

    def hsic(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.trace(a @ h @ b @ h))
    return hsic(k, l_) / np.sqrt(hsic(k, k) * hsic(l_, l_))


def test_linear_cka_is_the_kernel_definition_and_forgives_rotation_and_scale() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 8)), rng.normal(size=(12, 5))
    assert linear_cka(torch.tensor(x), torch.tensor(y)) == pytest.approx(hsic_cka(x, y), rel=1e-9)
    q, _ = np.linalg.qr(rng.normal(size=(8, 8)))                                   # an orthogonal matrix
    assert linear_cka(torch.tensor(x), torch.tensor(3.0 * x @ q + 1.5)) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(torch.tensor(x), torch.tensor(x)) == pytest.approx(1.0)
    assert linear_cka(torch.tensor(x), torch.ones(12, 4)) == 0.0                     # no variance: 0, not nan
    with pytest.raises(ValueError, match="same examples"):
        linear_cka(torch.tensor(x), torch.tensor(y[:5]))


def loaded(model: BertWithHeads, tokenizer: WordPieceTokenizer, name: str) -> LoadedModel:
    return LoadedModel(model.eval(), tokenizer, model.config, name)


def test_hidden_states_and_mask_probabilities_equal_transformers(tiny_tokenizer) -> None:
    a = loaded(tiny_model(1, heads=("mlm",)), tiny_tokenizer, "a")
    b = loaded(tiny_model(2, heads=("mlm",)), tiny_tokenizer, "b")
    ids, states = hidden_states(a, TEXT)
    hf = hf_copy(a.model, transformers.BertForMaskedLM)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_hidden_states=True)
    assert states.shape == (3, len(ids), 32)
    for ours, theirs in zip(states, out.hidden_states):
        torch.testing.assert_close(ours, theirs[0], rtol=0, atol=1e-5)
    comparison = compare_models(a, b, TEXT, top_k=3)
    [mask] = comparison.masks
    probs_a = out.logits[0, mask.position].softmax(-1)                               # (V,)
    hf_b = hf_copy(b.model, transformers.BertForMaskedLM)
    with torch.no_grad():
        probs_b = hf_b(torch.tensor([ids])).logits[0, mask.position].softmax(-1)    # (V,)
    assert [f.token_id for f in mask.fillers[:3]] == probs_a.topk(3).indices.tolist()
    for filler in mask.fillers:
        assert filler.prob_a == pytest.approx(float(probs_a[filler.token_id]), abs=1e-6)
        assert filler.prob_b == pytest.approx(float(probs_b[filler.token_id]), abs=1e-6)
        assert filler.rank_a == int((probs_a > probs_a[filler.token_id]).sum()) + 1
        assert filler.rank_b == int((probs_b > probs_b[filler.token_id]).sum()) + 1
        assert filler.change == pytest.approx(filler.prob_b - filler.prob_a)
    top_b = probs_b.topk(3).indices.tolist()
    assert set(top_b) <= {f.token_id for f in mask.fillers}                          # B's own top 3 are listed
    map_a, map_b, difference = comparison.attention_maps(1, 2)
    np.testing.assert_allclose(map_a, attention(a, TEXT).attentions[1, 2])
    np.testing.assert_allclose(map_b, attention(b, TEXT).attentions[1, 2])
    np.testing.assert_allclose(difference, map_b - map_a)


def test_a_model_against_itself_is_the_same_everywhere(tiny_tokenizer) -> None:
    a = loaded(tiny_model(1), tiny_tokenizer, "a")
    comparison = compare_models(a, a, TEXT)
    np.testing.assert_allclose(comparison.same_depth_cka, 1.0, atol=1e-9)
    np.testing.assert_allclose(np.diag(comparison.plain_cka), 1.0, atol=1e-9)
    assert comparison.samples == 13 and comparison.width == 32 and comparison.few        # 13 tokens < 32 dimensions
    np.testing.assert_allclose(comparison.cosine, 1.0, atol=1e-6)
    assert all(f.change == 0.0 and f.rank_a == f.rank_b for f in comparison.masks[0].fillers)


def test_changing_the_last_layer_changes_only_what_comes_after_it(tiny_tokenizer) -> None:
    """B = A with layer 2's (the last) feed-forward weights redrawn: the embeddings and layer 1 stay identical,
    layer 2's representation and the fillers move."""
    a_model = tiny_model(1)
    b_model = copy.deepcopy(a_model)
    torch.manual_seed(9)
    with torch.no_grad():
        b_model.bert.encoder.layer[1].output.dense.weight.normal_(0.0, 0.5)
    comparison = compare_models(loaded(a_model, tiny_tokenizer, "a"), loaded(b_model, tiny_tokenizer, "b"), TEXT)
    cka = comparison.same_depth_cka
    assert cka[0] == pytest.approx(1.0) and cka[1] == pytest.approx(1.0) and cka[2] < 0.99
    assert comparison.cosine[0] == pytest.approx(1.0) and comparison.cosine[2] < 0.99
    assert any(abs(f.change) > 1e-4 for f in comparison.masks[0].fillers)
    np.testing.assert_allclose(comparison.attention_maps(1, 0)[2], 0.0, atol=1e-6)   # attention before the FFN


def test_models_of_other_depth_and_width_compare_every_layer_pair(tiny_tokenizer) -> None:
    a = loaded(tiny_model(1), tiny_tokenizer, "a")
    torch.manual_seed(3)
    deep = BertWithHeads(tiny_config(num_hidden_layers=3, hidden_size=48, num_attention_heads=4,
                                     intermediate_size=40), heads=("mlm",))
    comparison = compare_models(a, loaded(deep, tiny_tokenizer, "deep"), TEXT)
    assert comparison.cka.shape == comparison.plain_cka.shape == (3, 4)
    assert comparison.same_depth_cka is None and comparison.cosine is None and comparison.width == 48
    assert np.all((comparison.plain_cka >= 0) & (comparison.plain_cka <= 1 + 1e-9))
    assert np.all(comparison.cka <= 1 + 1e-9)
    ids, states_a = hidden_states(a, TEXT)
    _, states_b = hidden_states(loaded(deep, tiny_tokenizer, "deep"), TEXT)
    for i, j in ((0, 0), (2, 3), (1, 2)):                 # each cell: the estimators on the two layers' states
        assert comparison.cka[i, j] == pytest.approx(debiased_linear_cka(states_a[i], states_b[j]), abs=1e-12)
        assert comparison.plain_cka[i, j] == pytest.approx(linear_cka(states_a[i], states_b[j]), abs=1e-12)
    with pytest.raises(ValueError, match="head 5 does not exist"):
        comparison.attention_maps(0, 5)


def test_models_that_read_the_text_differently_are_refused_by_tokens(tiny_tokenizer) -> None:
    """Compared by tokens only (``by_words=False``); by default they are compared by words
    (tests/probes/comparison/test_compare_words.py)."""
    a = loaded(tiny_model(1), tiny_tokenizer, "a")
    other = WordPieceTokenizer.from_vocab({tok: i for i, tok in enumerate(reversed(VOCAB))})
    with pytest.raises(ValueError, match="read this text into different tokens .* share a tokenizer"):
        compare_models(a, loaded(tiny_model(2), other, "other"), TEXT, by_words=False)
    with pytest.raises(ValueError, match="text is empty"):
        compare_models(a, a, "   ")
