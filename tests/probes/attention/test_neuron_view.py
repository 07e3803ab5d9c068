"""Neuron view: its softmax row is the Attention tab's row (``engine.probes.attention.maps``) and transformers' eager
attention on the same weights; its scores are the encoder's pre-softmax scores and the sum of the products shown
over √head_size; its query and key vectors are transformers' projections of the layer's input; padded keys get
weight 0 as the encoder's mask gives them; a layer, head or query that does not exist is a sentence."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import BertModel

from engine.model.loaded_model import LoadedModel
from engine.probes.attention.maps import attention
from engine.probes.attention.neuron_view import head_row, neuron_view
from support.probing_helpers import tiny_model
from support.reference import PARITY, PATHS, batch, hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT, PAIR = "the cat sat on the mat because it was tired.", "who played with the dog?"


@pytest.fixture(scope="module")
def loaded(tiny_tokenizer) -> LoadedModel:
    model = tiny_model(5)
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny model")


def test_the_softmax_row_is_the_attention_tabs_row_and_the_scores_the_encoders(loaded) -> None:
    shown = attention(loaded, TEXT, PAIR)
    ids = torch.tensor([shown.input_ids])
    with torch.inference_mode():
        scores = loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.tensor(
            [shown.token_type_ids]), output_qk=True).attention_scores                    # L x (1, nh, S, S)
    for layer in range(shown.num_layers):
        for head in range(shown.num_heads):
            for query in (0, 3, len(shown.tokens) - 1):
                view = neuron_view(loaded, TEXT, PAIR, layer, head, query)
                assert view.tokens == shown.tokens and not view.masked.any()
                np.testing.assert_allclose(view.weights, shown.attentions[layer, head, query], atol=PATHS, rtol=0)
                # scores are unnormalised (|s| up to ~5): fp32 rounding of q·k grows with |s|, so relative too
                np.testing.assert_allclose(view.scores, scores[layer][0, head, query].numpy(), atol=PATHS, rtol=PATHS)


def test_the_numbers_add_up(loaded) -> None:
    view = neuron_view(loaded, TEXT, None, layer=1, head=2, query=4)
    np.testing.assert_array_equal(view.products, view.query_vector[None, :] * view.key_vectors)
    np.testing.assert_allclose(view.scores, view.products.astype(np.float64).sum(-1) * view.scale, atol=1e-6, rtol=0)
    expected = np.exp(view.scores - view.scores.max())
    np.testing.assert_allclose(view.weights, expected / expected.sum(), atol=1e-6, rtol=0)
    assert view.head_size == loaded.config.hidden_size // loaded.config.num_attention_heads
    assert view.scale == pytest.approx(1 / math.sqrt(view.head_size))
    assert view.weights.sum() == pytest.approx(1.0, abs=1e-6)


def test_equals_transformers_eager_attention_and_projections(loaded) -> None:
    hf = hf_copy(loaded.model.bert, BertModel)
    shown = attention(loaded, TEXT, PAIR)
    ids, types = torch.tensor([shown.input_ids]), torch.tensor([shown.token_type_ids])
    with torch.no_grad():
        out = hf(input_ids=ids, token_type_ids=types, output_attentions=True, output_hidden_states=True)
    config = loaded.config
    size = config.hidden_size // config.num_attention_heads
    for layer in range(config.num_hidden_layers):
        attend = hf.encoder.layer[layer].attention.self
        with torch.no_grad():
            q = attend.query(out.hidden_states[layer])[0].view(-1, config.num_attention_heads, size)   # (S, nh, hd)
            k = attend.key(out.hidden_states[layer])[0].view(-1, config.num_attention_heads, size)     # (S, nh, hd)
        for head in range(config.num_attention_heads):
            view = neuron_view(loaded, TEXT, PAIR, layer, head, query=2)
            np.testing.assert_allclose(view.weights, out.attentions[layer][0, head, 2].numpy(), atol=PARITY, rtol=0)
            np.testing.assert_allclose(view.query_vector, q[2, head].numpy(), atol=PARITY, rtol=0)
            np.testing.assert_allclose(view.key_vectors, k[:, head].numpy(), atol=PARITY, rtol=0)


def test_padded_keys_get_no_weight_as_the_encoders_mask_gives_them(loaded) -> None:
    model = loaded.model
    inputs = batch(model.config, batch_size=3, seq_len=11)                       # rows of 11, 8 and 5 tokens
    hf = hf_copy(model.bert, BertModel)
    with torch.inference_mode():
        ours = model.bert(**inputs, output_attentions=True)
    with torch.no_grad():
        theirs = hf(**inputs, output_attentions=True)
    for row, length in ((1, 8), (2, 5)):
        for layer, head, query in ((0, 1, 0), (1, 3, length - 1)):
            found = head_row(model, inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"],
                             layer, head, query, row=row)
            assert found["masked"].tolist() == [False] * length + [True] * (11 - length)
            assert (found["weights"][length:] == 0).all()
            np.testing.assert_allclose(found["weights"], ours.attentions[layer][row, head, query].numpy(), atol=PATHS,
                                       rtol=0)
            np.testing.assert_allclose(found["weights"], theirs.attentions[layer][row, head, query].numpy(),
                                       atol=PARITY, rtol=0)
            # the same row without its padding: another matmul shape, so rounding differs (~2e-6 by layer 1)
            alone = {k: v[row:row + 1, :length] for k, v in inputs.items()}
            single = head_row(model, alone["input_ids"], alone["attention_mask"], alone["token_type_ids"], layer,
                              head, query)
            np.testing.assert_allclose(found["weights"][:length], single["weights"], atol=PARITY, rtol=0)
            np.testing.assert_allclose(found["scores"][:length], single["scores"], atol=PARITY, rtol=0)


@pytest.mark.parametrize("layer,head,query,match", [
    (2, 0, 0, "layer 2 does not exist: this model has 2 layers, numbered 0 to 1"),
    (0, 4, 0, "head 4 does not exist: each layer has 4 heads, numbered 0 to 3"),
    (0, -1, 0, "head -1 does not exist"),
    (0, 0, 6, "query token 6 does not exist: the input has 6 tokens, numbered 0 to 5"),
    (0, 0, 1.5, "the query token must be a whole number"),
    (0, 0, "two", "the query token must be a whole number"),
    (0.5, 0, 0, "layer must be a whole number"),
])
def test_a_layer_head_or_query_that_does_not_exist_is_a_sentence(loaded, layer, head, query, match) -> None:
    with pytest.raises(ValueError, match=match):
        neuron_view(loaded, "the cat sat.", None, layer, head, query)       # [CLS] the cat sat . [SEP]


def test_empty_text_and_truncation(loaded) -> None:
    with pytest.raises(ValueError, match="text is empty"):
        neuron_view(loaded, "  ")
    view = neuron_view(loaded, TEXT, None, query=7, max_length=8)
    assert len(view.tokens) == 8 and view.truncated and view.key_vectors.shape == (8, view.head_size)
