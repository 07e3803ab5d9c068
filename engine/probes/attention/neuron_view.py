"""The neuron view (bertviz's idea): the numbers that make one row of one head's attention map.

For a layer, head and query token ``i``, self-attention projects the layer's input into a query
vector q_i and key vectors k_j (each ``head_size`` long), multiplies them element by element
(q_i ⊙ k_j), sums each product and divides by √head_size (the scaled dot products, the scores),
adds the padding mask (the dtype's minimum at padded keys) and takes the softmax: row ``i`` of the
head's attention map. ``neuron_view(loaded, text, ...)`` returns all of these as a
:class:`NeuronView`, read from the model's explicit attention path (``output_qk``: the very
queries and keys the layer used), with the scores and weights recomputed from the products shown,
so the numbers on screen add up. Plain numpy out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.model.loaded_model import LoadedModel
from engine.checks import is_whole_number
from engine.model.heads import BertWithHeads
from engine.probes.attention.maps import check_head_index, encode_input, model_inputs


@dataclass
class NeuronView:
    """One query token's row of one head: its query, every key, their products, scores and softmax."""

    text: str
    text_pair: str | None
    source: str                      # which model (LoadedModel.source)
    tokens: list[str]                # S pieces, specials included
    layer: int
    head: int
    query: int                       # the query token's position
    query_vector: np.ndarray         # (hd,) q_i
    key_vectors: np.ndarray          # (S, hd) k_j
    products: np.ndarray             # (S, hd) q_i ⊙ k_j
    scores: np.ndarray               # (S,) sum(q_i ⊙ k_j) / √hd, before the mask
    masked: np.ndarray               # (S,) bool: padded keys (the mask sets their weight to 0)
    weights: np.ndarray              # (S,) softmax of the scores over the keys not masked: the attention row
    truncated: bool = False

    @property
    def head_size(self) -> int:
        return int(self.query_vector.shape[0])

    @property
    def scale(self) -> float:
        """1 / √head_size, the factor on every dot product."""
        return 1.0 / math.sqrt(self.head_size)


def check_query(query: Any, num_tokens: int) -> int:
    """``query`` as an int position among ``num_tokens``, or a ``ValueError`` naming the range (0-based)."""
    if not is_whole_number(query):
        raise ValueError(f"the query token must be a whole number (a position from 0), got {query!r}")
    query = int(query)
    if not 0 <= query < num_tokens:
        raise ValueError(f"query token {query} does not exist: the input has {num_tokens} tokens, numbered "
                         f"0 to {num_tokens - 1}")
    return query


def row_numbers(q: torch.Tensor, k: torch.Tensor, masked: torch.Tensor) -> dict[str, np.ndarray]:
    """The products, scores, mask and weights of one query ``q`` (hd,) against keys ``k`` (S, hd), float32;
    ``masked`` (S,) bool marks padded keys (weight 0)."""
    with torch.inference_mode():
        products = q[None, :] * k                                                   # (S, hd)
        scores = products.sum(-1) / math.sqrt(q.shape[0])                           # (S,)
        weights = torch.softmax(scores.masked_fill(masked, float("-inf")), dim=-1)  # (S,); padded keys -> 0
    return {"query_vector": q.cpu().numpy(), "key_vectors": k.cpu().numpy(), "products": products.cpu().numpy(),
            "scores": scores.cpu().numpy(), "masked": masked.cpu().numpy(), "weights": weights.cpu().numpy()}


def head_row(model: BertWithHeads, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             token_type_ids: torch.Tensor, layer: int, head: int, query: int, row: int = 0) -> dict[str, np.ndarray]:
    """The query, keys, products, scores, mask and weights of ``row`` of a batch (B, S) at (layer, head, query).

    Padded keys (``attention_mask`` 0) get weight 0, exactly as the encoder's additive mask gives them.
    """
    config = model.config
    layer, head = check_head_index(config.num_hidden_layers, config.num_attention_heads, layer, head)
    query = check_query(query, int(input_ids.shape[1]))
    with torch.inference_mode():
        encoded = model.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, output_qk=True)
        q = encoded.queries[layer][row, head, query].float()                        # (B, nh, S, hd) -> (hd,)
        k = encoded.keys[layer][row, head].float()                                  # (B, nh, S, hd) -> (S, hd)
        masked = attention_mask[row] == 0                                           # (S,)
    return row_numbers(q, k, masked)


@dataclass
class NeuronInputs:
    """Every layer's queries and keys for one input (no padding): what any neuron view of it reads, kept by
    the app's forward cache so another layer, head or query token runs no model."""

    text: str
    text_pair: str | None
    source: str
    tokens: list[str]
    queries: np.ndarray              # (L, nh, S, hd) float32
    keys: np.ndarray                 # (L, nh, S, hd) float32
    truncated: bool = False


def neuron_inputs(loaded: LoadedModel, text: str, text_pair: str | None = None,
                  max_length: int | None = None) -> NeuronInputs:
    """One forward of ``text`` (and ``text_pair``), encoded as the Attention tab encodes it: its queries and
    keys at every layer, copied into float32 arrays one layer at a time as the encoder makes them."""
    encoding = encode_input(loaded, text, text_pair, max_length)
    ids, types = model_inputs(loaded, encoding)                                     # (1, S) each
    config = loaded.config
    heads = config.num_attention_heads
    shape = (config.num_hidden_layers, heads, ids.shape[1], config.head_size)
    queries, keys = np.empty(shape, dtype=np.float32), np.empty(shape, dtype=np.float32)  # (L, nh, S, hd)

    def keep(index: int, probes: dict[str, torch.Tensor]) -> None:
        queries[index] = probes["queries"][0].float().cpu().numpy()              # (1, nh, S, hd) -> (nh, S, hd)
        keys[index] = probes["keys"][0].float().cpu().numpy()

    with torch.inference_mode():
        loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=types, output_qk=True,
                          on_layer=keep)
    pair = text_pair if text_pair and text_pair.strip() else None
    return NeuronInputs(text=text, text_pair=pair, source=loaded.source, tokens=list(encoding.shown),
                        queries=queries, keys=keys, truncated=encoding.truncated)


def neuron_view_of(inputs: NeuronInputs, layer: Any = 0, head: Any = 0, query: Any = 0) -> NeuronView:
    """The :class:`NeuronView` of (``layer``, ``head``, ``query``) from kept :class:`NeuronInputs` (no model
    run); the same numbers as :func:`neuron_view`."""
    num_layers, num_heads = inputs.queries.shape[:2]
    layer, head = check_head_index(num_layers, num_heads, layer, head)
    query = check_query(query, len(inputs.tokens))
    q = torch.from_numpy(inputs.queries[layer, head, query])                        # (hd,)
    k = torch.from_numpy(inputs.keys[layer, head])                                  # (S, hd)
    found = row_numbers(q, k, torch.zeros(k.shape[0], dtype=torch.bool))
    return NeuronView(text=inputs.text, text_pair=inputs.text_pair, source=inputs.source, tokens=list(inputs.tokens),
                      layer=layer, head=head, query=query, truncated=inputs.truncated, **found)


def neuron_view(loaded: LoadedModel, text: str, text_pair: str | None = None, layer: Any = 0, head: Any = 0,
                query: Any = 0, max_length: int | None = None) -> NeuronView:
    """Head (``layer``, ``head``)'s row for the ``query``-th token (all 0-based) of ``text`` (and ``text_pair``),
    encoded as the Attention tab encodes it (truncated to ``max_length``). Raises ``ValueError`` for a layer,
    head or query that does not exist, empty text, or a model without tokenizer files."""
    config = loaded.config
    layer, head = check_head_index(config.num_hidden_layers, config.num_attention_heads, layer, head)
    encoding = encode_input(loaded, text, text_pair, max_length)
    query = check_query(query, len(encoding.input_ids))
    ids, types = model_inputs(loaded, encoding)                                     # (1, S) each
    found = head_row(loaded.model, ids, torch.ones_like(ids), types, layer, head, query)
    pair = text_pair if text_pair and text_pair.strip() else None
    return NeuronView(text=text, text_pair=pair, source=loaded.source, tokens=list(encoding.shown), layer=layer,
                      head=head, query=query, truncated=encoding.truncated, **found)
