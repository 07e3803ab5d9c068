"""engine.probes.representations.embeddings: the embedding decomposition against our forward and transformers,
neighbours, PCA."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import transformers

from conftest import tiny_config
from engine.probes import inference
from engine.model.loaded_model import LoadedModel
from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult, embeddings, pca_2d
from engine.probes.representations.position_similarity import embeddings_over_checkpoints
from engine.model.heads import BertWithHeads
from support.reference import PARITY, hf_copy, randomize_

pytestmark = pytest.mark.usefixtures("one_thread")

PAIR = ("the cat sat on the mat", "the dog ran to the house")


def _model(seed: int = 0, **config) -> BertWithHeads:
    torch.manual_seed(seed)
    return randomize_(BertWithHeads(tiny_config(**config), heads=("mlm", "nsp")), seed).eval()


@pytest.fixture(scope="module")
def loaded(tiny_tokenizer) -> LoadedModel:
    model = _model()
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny test model")


@pytest.fixture(scope="module")
def result(loaded) -> EmbeddingsResult:
    return embeddings(loaded, *PAIR)


def _tensors(result: EmbeddingsResult) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.tensor([result.input_ids.tolist()]),
            "token_type_ids": torch.tensor([result.token_type_ids.tolist()])}


def test_exported_from_the_facade() -> None:
    assert inference.embeddings is embeddings
    assert inference.embeddings_over_checkpoints is embeddings_over_checkpoints
    assert {"embeddings", "embeddings_over_checkpoints", "EmbeddingsResult"} <= set(inference.__all__)


def test_layout_shapes_and_no_tensors(result: EmbeddingsResult, loaded: LoadedModel) -> None:
    tokens = result.tokens
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and tokens[-1] == "[SEP]"
    sep = tokens.index("[SEP]")
    assert result.token_type_ids.tolist() == [0] * (sep + 1) + [1] * (len(tokens) - sep - 1)
    assert result.segments[0] == "special" and result.segments[1] == "A" and result.segments[sep + 1] == "B"
    assert result.position_ids.tolist() == list(range(len(tokens)))
    seq, hidden = len(tokens), loaded.config.hidden_size
    for name in COMPONENTS:
        assert result.component(name).shape == (seq, hidden)
        assert result.norms[name].shape == (seq,)
        np.testing.assert_allclose(result.norms[name], np.linalg.norm(result.component(name), axis=1), rtol=1e-5)
    assert result.num_positions == 64 == loaded.config.max_position_embeddings   # min(64, 128)
    assert result.position_similarity.shape == (64, 64) and result.position_pca.shape == (64, 2)
    assert result.neighbour_ids.shape == result.neighbour_scores.shape == (seq, 8)
    assert result.contextual.shape == (seq, hidden) and result.contextual_pca.shape == (seq, 2)
    assert result.layer == result.num_layers == loaded.config.num_hidden_layers
    for field in dataclasses.fields(result):
        assert not isinstance(getattr(result, field.name), torch.Tensor), field.name
    with pytest.raises(ValueError, match="unknown component"):
        result.component("nope")


def test_components_are_the_models_rows_and_sum_to_its_embedding_output(result, loaded) -> None:
    emb = loaded.model.bert.embeddings
    ids, types = result.input_ids, result.token_type_ids
    np.testing.assert_array_equal(result.word, emb.word_embeddings.weight[ids].detach().numpy())
    np.testing.assert_array_equal(result.position, emb.position_embeddings.weight[:len(ids)].detach().numpy())
    np.testing.assert_array_equal(result.segment, emb.token_type_embeddings.weight[types].detach().numpy())
    np.testing.assert_allclose(result.summed, result.word + result.position + result.segment, atol=1e-6)
    with torch.no_grad():
        out = loaded.model(**_tensors(result), output_hidden_states=True).encoder
    np.testing.assert_allclose(result.output, out.hidden_states[0][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(result.contextual, out.hidden_states[-1][0].numpy(), atol=1e-6)
    assert result.output_max_diff <= 1e-6


def test_matches_transformers_on_the_same_weights(loaded, result) -> None:
    hf = hf_copy(loaded.model, transformers.BertForPreTraining).bert
    inputs = _tensors(result)
    with torch.no_grad():
        hf_emb = hf.embeddings
        np.testing.assert_allclose(result.word, hf_emb.word_embeddings(inputs["input_ids"])[0].numpy(), atol=PARITY)
        np.testing.assert_allclose(result.segment, hf_emb.token_type_embeddings(inputs["token_type_ids"])[0].numpy(),
                                   atol=PARITY)
        reference = hf_emb(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"])[0]
        np.testing.assert_allclose(result.output, reference.numpy(), atol=PARITY)
        states = hf(**inputs, output_hidden_states=True).hidden_states
    for layer in range(loaded.config.num_hidden_layers + 1):
        mine = embeddings(loaded, *PAIR, layer=layer).contextual
        np.testing.assert_allclose(mine, states[layer][0].numpy(), atol=PARITY)


def test_layer_zero_is_the_embedding_output(loaded, result) -> None:
    zero = embeddings(loaded, *PAIR, layer=0)
    np.testing.assert_allclose(zero.contextual, result.output, atol=1e-6)
    assert zero.layer == 0


@pytest.mark.parametrize("layer, error", [(-1, ValueError), (3, ValueError), (True, TypeError), (1.5, TypeError)])
def test_bad_layer_is_refused(loaded, layer, error) -> None:
    with pytest.raises(error, match="layer"):
        embeddings(loaded, "the cat", layer=layer)


@pytest.mark.parametrize("kwargs, message", [
    (dict(text=""), "empty"), (dict(text="   "), "empty"), (dict(neighbours=0), "neighbours"),
    (dict(neighbours=101), "neighbours"), (dict(max_length=65), "longer than"), (dict(positions=1), "positions"),
    (dict(positions=65), "positions"),
])
def test_bad_arguments_are_clear_errors(loaded, kwargs, message) -> None:
    args = dict(text="the cat")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        embeddings(loaded, **args)


def test_model_without_tokenizer_is_refused(loaded) -> None:
    bare = LoadedModel(loaded.model, None, loaded.config, "no tokenizer")
    with pytest.raises(ValueError, match="no tokenizer"):
        embeddings(bare, "the cat")


def test_text_too_long_is_truncated_at_max_length(loaded) -> None:
    long_text = " ".join(["the cat sat on the mat"] * 30)
    capped = embeddings(loaded, long_text)                          # default: the model's 64 positions
    assert len(capped.tokens) == 64 and capped.truncated and capped.num_truncated_tokens > 0
    assert capped.tokens[-1] == "[SEP]" and capped.max_length == 64
    short = embeddings(loaded, long_text, "the dog", max_length=16)
    assert len(short.tokens) == 16 and short.truncated and short.tokens.count("[SEP]") == 2
    assert not embeddings(loaded, "the cat").truncated


def test_neighbours_are_the_true_top_k_and_never_the_token_itself(result, loaded) -> None:
    table = loaded.model.bert.embeddings.word_embeddings.weight.detach().double().numpy()   # (V, H)
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    for position, token_id in enumerate(result.input_ids):
        sims = unit @ unit[token_id]                                                        # (V,)
        sims[token_id] = -np.inf
        best = np.sort(sims)[::-1][:8]
        assert token_id not in result.neighbour_ids[position]
        np.testing.assert_allclose(result.neighbour_scores[position], best, atol=1e-5)
        np.testing.assert_allclose(sims[result.neighbour_ids[position]], result.neighbour_scores[position], atol=1e-5)
        assert len(result.neighbour_tokens[position]) == 8
    assert np.all(np.diff(result.neighbour_scores, axis=1) <= 1e-7)                         # best first
    the = [i for i, t in enumerate(result.tokens) if t == "the"]
    assert len(the) >= 2 and result.neighbour_tokens[the[0]] == result.neighbour_tokens[the[1]]


def test_neighbour_count_and_ids_outside_the_tokenizer(loaded) -> None:
    many = embeddings(loaded, "cat", neighbours=100)
    assert many.neighbour_ids.shape == (3, 100)
    vocab = loaded.tokenizer.vocab_size
    outside = [t for row_ids, row in zip(many.neighbour_ids, many.neighbour_tokens) for i, t in zip(row_ids, row)
               if i >= vocab]
    assert outside and all(t.startswith("<id ") for t in outside)    # the model has 3 ids the tokenizer lacks


def test_position_similarity_and_pca(result, loaded) -> None:
    sims = result.position_similarity
    np.testing.assert_allclose(sims, sims.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(sims), 1.0, atol=1e-5)
    table = loaded.model.bert.embeddings.position_embeddings.weight[:64].detach().double().numpy()
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    np.testing.assert_allclose(sims, unit @ unit.T, atol=1e-5)
    coords, ratios = pca_2d(table)
    np.testing.assert_allclose(result.position_pca, coords, atol=1e-5)
    np.testing.assert_allclose(result.position_pca_variance, ratios, atol=1e-6)
    fewer = embeddings(loaded, "the cat", positions=10)
    assert fewer.num_positions == 10 and fewer.position_similarity.shape == (10, 10)


def test_pca_matches_numpy_svd_with_a_fixed_sign() -> None:
    rng = np.random.default_rng(0)
    for shape in ((30, 7), (7, 30)):                                 # both Gram paths
        x = rng.normal(size=shape) * np.linspace(3, 1, shape[1])
        coords, ratios = pca_2d(x)
        centered = x - x.mean(0)
        _, s, vt = np.linalg.svd(centered, full_matrices=False)
        for c in range(2):
            loading = vt[c] if vt[c][np.argmax(np.abs(vt[c]))] > 0 else -vt[c]
            np.testing.assert_allclose(coords[:, c], centered @ loading, atol=1e-8)
        np.testing.assert_allclose(ratios, s[:2] ** 2 / (s ** 2).sum(), atol=1e-10)
        flipped, _ = pca_2d(x[::-1])                                 # sign does not depend on row order
        np.testing.assert_allclose(flipped, coords[::-1], atol=1e-8)
    assert np.all(pca_2d(np.ones((5, 4)))[0] == 0)                   # no variance
    assert pca_2d(np.ones((1, 4)))[0].shape == (1, 2)
    line, line_ratios = pca_2d(np.arange(10.0)[:, None] * np.array([[1.0, 2.0]]))
    assert np.all(line[:, 1] == 0) and line_ratios[0] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        pca_2d(np.ones(3))


def test_contextual_pca_is_the_pca_of_the_layer(result) -> None:
    coords, ratios = pca_2d(result.contextual)
    np.testing.assert_allclose(result.contextual_pca, coords, atol=1e-6)
    assert ratios[0] >= ratios[1] >= 0


def test_segment_difference(result, loaded) -> None:
    table = loaded.model.bert.embeddings.token_type_embeddings.weight.detach().numpy()
    np.testing.assert_allclose(result.segment_difference, table[1] - table[0], atol=1e-7)
    assert result.segment_difference_norm == pytest.approx(float(np.linalg.norm(table[1] - table[0])), rel=1e-5)
    cosine = table[0] @ table[1] / np.linalg.norm(table[0]) / np.linalg.norm(table[1])
    assert result.segment_cosine == pytest.approx(float(cosine), abs=1e-5)
    b_rows = result.token_type_ids == 1
    np.testing.assert_allclose(result.segment[b_rows] - result.segment[0], np.broadcast_to(
        result.segment_difference, result.segment[b_rows].shape), atol=1e-6)


def test_one_segment_type_model(tiny_tokenizer) -> None:
    model = _model(type_vocab_size=1)
    single = LoadedModel(model, tiny_tokenizer, model.config, "one segment")
    result = embeddings(single, "the cat")
    assert result.segment_difference is None and result.segment_difference_norm is None
    paired = embeddings(single, "the cat", "the dog")      # a pair is read as the model takes it: type ids all 0
    assert "B" in paired.segments and paired.segment_difference is None and "segment" in paired.components
    np.testing.assert_allclose(paired.segment, np.broadcast_to(paired.segment[0], paired.segment.shape))
    assert paired.output_max_diff < 1e-5


def test_repeated_words(result) -> None:
    repeats = {r.token: r for r in result.repeats}
    assert set(repeats) == {"the"}                               # specials never count
    the = repeats["the"]
    p, q = the.positions[:2]
    np.testing.assert_array_equal(result.word[p], result.word[q])    # same word embedding
    a, b = result.output[p], result.output[q]
    assert the.output_cosine == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), abs=1e-5)
    assert len(the.cosine_by_layer) == result.num_layers + 1
    assert the.contextual_cosine == pytest.approx(the.cosine_by_layer[result.layer])
    assert the.output_cosine < 0.999                             # positions make the two vectors differ


def test_over_checkpoints(tiny_tokenizer) -> None:
    models = [(f"step {s}", LoadedModel(m, tiny_tokenizer, m.config, f"m{s}"))
              for s, m in ((100, _model(1)), (200, _model(2)))]
    sims = embeddings_over_checkpoints(models, positions=16)
    assert [s.label for s in sims] == ["step 100", "step 200"]
    for s, (_, m) in zip(sims, models):
        assert s.matrix.shape == (16, 16)
        assert s.adjacent == pytest.approx(float(np.diagonal(s.matrix, 1).mean()))
        table = m.model.bert.embeddings.position_embeddings.weight[:16].detach().numpy()
        unit = table / np.linalg.norm(table, axis=1, keepdims=True)
        np.testing.assert_allclose(s.matrix, unit @ unit.T, atol=1e-5)
    assert not np.allclose(sims[0].matrix, sims[1].matrix)
    assert embeddings_over_checkpoints(models, positions=500)[0].matrix.shape == (64, 64)   # capped at the model's
    with pytest.raises(ValueError, match="no checkpoints"):
        embeddings_over_checkpoints([])
    with pytest.raises(ValueError, match="at least 2"):
        embeddings_over_checkpoints(models, positions=1)
