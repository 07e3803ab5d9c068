"""Two models on one input: what changed between them (issue "See why", item 3).

``compare_models(a, b, text)`` runs both models on the same tokens and returns a :class:`ModelComparison`:

* **Representations**: linear CKA (Kornblith et al., 2019) between every layer of A and every layer
  of B (embeddings output = layer 0), over the input's tokens: ``CKA(X, Y) = ||Yᶜᵀ Xᶜ||²_F /
  (||Xᶜᵀ Xᶜ||_F ||Yᶜᵀ Yᶜ||_F)`` with column-centred ``Xᶜ`` (S, H_a), ``Yᶜ`` (S, H_b). It is 1 for
  the same representation up to rotation and scale, works across hidden sizes, and is what the
  field uses to compare layers of two networks. Where the hidden sizes are equal the mean cosine of
  each token's two vectors is given too (it sees rotations that CKA forgives). ``same_depth_cka``
  is the diagonal (layer i of A against layer i of B) when both have the same number of layers.
* **Attention**: every head's probabilities in both models (``engine.probes.attention``'s result, from the
  same pass as the hidden states), so a view can show one head of each and their difference.
* **Fill-mask**, when the text has ``[MASK]``: each model's top-k at each mask and, for the union of
  both lists, the probability and the vocabulary rank of every filler in both models.

Both models must read the text into the same token ids (one tokenizer, or two with equal vocabularies
for this text): comparing positions of different tokenizations has no meaning, and the error says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from engine import cancellation
from engine.checkpoints.hf_format import LoadedModel
from engine.probes.attention import AttentionResult, attention_result, encode_input, model_inputs
from engine.probes.fill_mask import fill_mask_with_probabilities


@dataclass(frozen=True)
class ComparedFiller:
    """One candidate filler of a mask, scored by both models."""

    token_id: int
    token: str
    prob_a: float
    prob_b: float
    rank_a: int                  # 1 = the model's top prediction, over the whole vocabulary
    rank_b: int

    @property
    def change(self) -> float:
        """prob_b - prob_a."""
        return self.prob_b - self.prob_a


@dataclass(frozen=True)
class MaskComparison:
    """One ``[MASK]``: A's top-k, then B's top-k fillers A did not list, each scored by both models."""

    index: int                   # which mask (0-based, in text order)
    position: int                # its token position
    fillers: list[ComparedFiller]
    top_k: int


@dataclass
class ModelComparison:
    """Everything the Compare view draws for one input and two models."""

    text: str
    source_a: str
    source_b: str
    tokens: list[str]
    cka: np.ndarray              # (L_a + 1, L_b + 1): linear CKA of layer i of A and layer j of B
    cosine: np.ndarray | None    # (L + 1,): mean per-token cosine of the same layer; None if sizes differ
    attention_a: AttentionResult
    attention_b: AttentionResult
    masks: list[MaskComparison]

    def attention_maps(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Head ``(layer, head)`` in A, in B, and B - A, each (S, S); the index must exist in both."""
        map_a = self.attention_a.head_map(layer, head)
        map_b = self.attention_b.head_map(layer, head)
        return map_a, map_b, map_b - map_a

    @property
    def same_depth_cka(self) -> np.ndarray | None:
        """CKA of layer i of A against layer i of B (None when the depths differ)."""
        rows, cols = self.cka.shape
        return np.diag(self.cka).copy() if rows == cols else None


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA of two representations of the same n examples: ``x`` (n, p), ``y`` (n, q).

    0 when either has no variance left after centring (a single example, or constant vectors).
    """
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"CKA needs the same examples on both sides, got {x.shape[0]} and {y.shape[0]}")
    x = x.double() - x.double().mean(0, keepdim=True)                          # (n, p), centred columns
    y = y.double() - y.double().mean(0, keepdim=True)                          # (n, q)
    cross = torch.linalg.matrix_norm(y.T @ x) ** 2                             # ||Yᵀ X||²_F
    norm_x, norm_y = torch.linalg.matrix_norm(x.T @ x), torch.linalg.matrix_norm(y.T @ y)
    if float(norm_x) == 0.0 or float(norm_y) == 0.0:
        return 0.0
    return float(cross / (norm_x * norm_y))


def hidden_states(loaded: LoadedModel, text: str, text_pair: str | None = None) -> tuple[list[int], torch.Tensor]:
    """The input ids and every layer's output for one input: (L + 1, S, H), [0] = the embeddings."""
    ids, states, _ = _encode(loaded, text, text_pair)
    return ids, states


def _encode(loaded: LoadedModel, text: str, text_pair: str | None) -> tuple[list[int], torch.Tensor, AttentionResult]:
    """One pass: the input ids, every layer's output (L + 1, S, H) and every head's attention."""
    encoding = encode_input(loaded, text, text_pair)
    ids, types = model_inputs(loaded, encoding)
    with torch.inference_mode():
        out = loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=types,
                                output_hidden_states=True, output_attentions=True)
    states = torch.stack([h[0] for h in out.hidden_states]).float().cpu()     # L+1 x (S, H) -> (L+1, S, H)
    return list(encoding.input_ids), states, attention_result(loaded, encoding, out.attentions, text, text_pair)


def _check_same_tokens(a: LoadedModel, b: LoadedModel, ids_a: Sequence[int], ids_b: Sequence[int]) -> None:
    if list(ids_a) != list(ids_b):
        raise ValueError(f"the two models read this text into different tokens ({len(ids_a)} for "
                         f"{a.source}, {len(ids_b)} for {b.source}; their vocabularies differ): compare models "
                         "that share a tokenizer, e.g. two checkpoints of one run, or a model and its fine-tuned copy")


def _mask_comparisons(a: LoadedModel, b: LoadedModel, text: str, text_pair: str | None,
                      top_k: int) -> list[MaskComparison]:
    """Per mask: A's top-k, then B's extra fillers, each with both models' probability and rank."""
    result_a, probs_a = fill_mask_with_probabilities(a, text, top_k, text_pair)     # probs (M, V)
    result_b, probs_b = fill_mask_with_probabilities(b, text, top_k, text_pair)
    if probs_a.shape[-1] != probs_b.shape[-1]:
        raise ValueError(f"the two models have different vocabularies ({probs_a.shape[-1]:,} and "
                         f"{probs_b.shape[-1]:,} entries): their fill-mask predictions cannot be compared")
    comparisons = []
    for mask_a, mask_b, pa, pb in zip(result_a.masks, result_b.masks, probs_a, probs_b):
        ids = list(dict.fromkeys(mask_a.token_ids + mask_b.token_ids))            # A's order, then B's extras
        rank_a = (pa.unsqueeze(0) > pa[ids].unsqueeze(1)).sum(1) + 1               # (U,) 1-based vocabulary ranks
        rank_b = (pb.unsqueeze(0) > pb[ids].unsqueeze(1)).sum(1) + 1               # (U,)
        names = dict(zip(mask_a.token_ids + mask_b.token_ids, mask_a.tokens + mask_b.tokens))
        fillers = [ComparedFiller(i, names[i], float(pa[i]), float(pb[i]), int(ra), int(rb))
                   for i, ra, rb in zip(ids, rank_a.tolist(), rank_b.tolist())]
        comparisons.append(MaskComparison(mask_a.index, mask_a.position, fillers, result_a.top_k))
    return comparisons


def compare_models(a: LoadedModel, b: LoadedModel, text: str, text_pair: str | None = None,
                   top_k: int = 5) -> ModelComparison:
    """Compare ``a`` and ``b`` on ``text`` (see the module docstring). ``ValueError`` for an empty text, a
    model without a tokenizer, or two models that tokenize the text differently."""
    ids_a, states_a, attention_a = _encode(a, text, text_pair)                   # states (L_a+1, S, H_a)
    cancellation.check()                                                         # between the two models
    ids_b, states_b, attention_b = _encode(b, text, text_pair)                   # states (L_b+1, S, H_b)
    _check_same_tokens(a, b, ids_a, ids_b)
    cka = np.array([[linear_cka(x, y) for y in states_b] for x in states_a])     # (L_a+1, L_b+1)
    cosine = None
    if states_a.shape == states_b.shape:
        cosine = torch.nn.functional.cosine_similarity(states_a, states_b, dim=-1).mean(-1).numpy()   # (L+1,)
    has_mask = a.tokenizer.mask_token_id in ids_a
    masks = []
    if has_mask and "mlm" in a.heads and "mlm" in b.heads:
        cancellation.check()
        masks = _mask_comparisons(a, b, text, text_pair, top_k)
    return ModelComparison(text=text, source_a=a.source, source_b=b.source, tokens=attention_a.tokens, cka=cka,
                           cosine=cosine, attention_a=attention_a, attention_b=attention_b, masks=masks)
