"""Two models on one input: what changed between them (issue "See why", item 3).

``compare_models(a, b, text)`` runs both models on the same tokens and returns a :class:`ModelComparison`:

* **Representations on this input**: linear CKA (Kornblith et al., 2019) between every layer of A and every layer
  of B (embeddings output = layer 0), over the input's tokens, debiased (``cka``) and plain (``plain_cka``), from
  ``engine.probes.comparison.cka``. One input has fewer tokens than a model has dimensions (``few``): its plain CKA
  is then biased towards 1 and its debiased CKA noisy, so the Compare tab leads with CKA over a sentence set
  (``engine.probes.comparison.sentence_set``). Where the hidden sizes are equal the mean cosine of each token's two
  vectors is given too (it sees rotations that CKA forgives). ``same_depth_cka`` is the diagonal (layer i of A
  against layer i of B) when both have the same number of layers.
* **Attention**: every head's probabilities in both models (``engine.probes.attention.maps``'s result, from the
  same pass as the hidden states), so a view can show one head of each and their difference.
* **Fill-mask**, when the text has ``[MASK]``: each model's top-k at each mask and, for the union of
  both lists, the probability and the vocabulary rank of every filler in both models.
* **Layers matched by relative depth** (``layer_pairs``, ``matched_cka``): hidden state i of A with hidden
  state ``j = round(i * L_b / L_a)`` of B (rounded half up), the diagonal when the depths are equal.

Two models that read the text into the same token ids (one tokenizer, or two that agree on this text) are
compared **by tokens**, position by position. When the ids differ the models are compared **by words**
(``engine.probes.comparison.word_alignment``): each model's hidden states are pooled over each word's pieces
(mean), CKA and cosine run over the words, attention is drawn between words, and the fill-mask guesses are compared
by the words they write (``engine.probes.comparison.word_fillers``); ``alignment`` says which words. A ``[MASK]``
is read as each model's own mask token (``fill_mask.model_mask_text``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.probes.attention.maps import AttentionResult, attention_result, encode_input, model_inputs
from engine.probes.heads.fill_mask import BERT_MASK, fill_mask_with_probabilities, model_mask_text
from engine.probes.comparison.cka import LayerGrid, cka_matrices, few_samples
from engine.probes.comparison.word_alignment import WordAlignment, align_words
from engine.probes.comparison.word_fillers import WordMask, compare_fillers_by_words
from engine.text.encoding import Encoding


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
class ModelComparison(LayerGrid):
    """Everything the Compare view draws for one input and two models."""

    text: str
    source_a: str
    source_b: str
    tokens: list[str]            # what CKA and the maps run over: the tokens, or the words when aligned by words
    cka: np.ndarray              # (L_a + 1, L_b + 1): debiased linear CKA of layer i of A and layer j of B (NaN: < 4)
    plain_cka: np.ndarray        # (L_a + 1, L_b + 1): the plain (biased) estimator of the same
    cosine: np.ndarray | None    # (L + 1,): mean per-token (per-word) cosine of the same layer; None if sizes differ
    attention_a: AttentionResult
    attention_b: AttentionResult
    masks: list[MaskComparison] | list[WordMask]
    alignment: WordAlignment | None = None      # the words, when the tokenizations differ; None: by tokens
    width: int = 0               # the wider model's hidden size
    few: bool = False            # fewer tokens (words) than ``width`` (``cka.few_samples``)

    @property
    def samples(self) -> int:
        """How many tokens (or aligned words) the CKA runs over."""
        return len(self.tokens)

    def attention_maps(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Head ``(layer, head)`` in A, in B, and B - A, each (S, S), or between words (W, W) when aligned by
        words; the index must exist in both."""
        map_a = self.attention_a.head_map(layer, head)
        map_b = self.attention_b.head_map(layer, head)
        if self.alignment is not None:
            map_a, map_b = self.alignment.pool_attention(map_a, "a"), self.alignment.pool_attention(map_b, "b")
        return map_a, map_b, map_b - map_a


def hidden_states(loaded: LoadedModel, text: str, text_pair: str | None = None) -> tuple[list[int], torch.Tensor]:
    """The input ids and every layer's output for one input: (L + 1, S, H), [0] = the embeddings."""
    encoding, states, _ = _encode(loaded, text, text_pair)
    return list(encoding.input_ids), states


def _encode(loaded: LoadedModel, text: str, text_pair: str | None) -> tuple[Encoding, torch.Tensor, AttentionResult]:
    """One pass: the encoding, every layer's output (L + 1, S, H) and every head's attention."""
    encoding = _encoding(loaded, text, text_pair)
    ids, types = model_inputs(loaded, encoding)
    with torch.inference_mode():
        out = loaded.model.bert(ids, attention_mask=torch.ones_like(ids), token_type_ids=types,
                                output_hidden_states=True, output_attentions=True)
    states = torch.stack([h[0] for h in out.hidden_states]).float().cpu()     # L+1 x (S, H) -> (L+1, S, H)
    return encoding, states, attention_result(loaded, encoding, out.attentions, text, text_pair)


def _encoding(loaded: LoadedModel, text: str, text_pair: str | None) -> Encoding:
    """The input as ``loaded`` reads it: ``[MASK]`` written as its own mask token, at most its usable length."""
    tokenizer = loaded.require_tokenizer()
    if isinstance(text, str):                     # anything else: encode_input's own refusal
        text, text_pair = model_mask_text(tokenizer, text), model_mask_text(tokenizer, text_pair)
    return encode_input(loaded, text, text_pair, max_length=loaded.config.max_tokens)


def written_mask(loaded: LoadedModel) -> str | None:
    """The token ``[MASK]`` was written as for ``loaded`` (None: read as typed)."""
    written = model_mask_text(loaded.tokenizer, BERT_MASK)
    return None if written == BERT_MASK else written


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
                   top_k: int = 5, by_words: bool | None = None) -> ModelComparison:
    """Compare ``a`` and ``b`` on ``text`` (see the module docstring): by tokens when both read the same token
    ids, else by words; ``by_words`` True aligns by words always, False refuses different tokens. ``ValueError``
    for an empty text, a model without a tokenizer, or words that cannot be aligned (``align_words``)."""
    encoding_a, states_a, attention_a = _encode(a, text, text_pair)             # states (L_a+1, S_a, H_a)
    cancellation.check()                                                         # between the two models
    encoding_b, states_b, attention_b = _encode(b, text, text_pair)             # states (L_b+1, S_b, H_b)
    ids_a, ids_b = encoding_a.input_ids, encoding_b.input_ids
    alignment, tokens = None, attention_a.tokens
    if by_words or (by_words is None and list(ids_a) != list(ids_b)):
        alignment = align_words(text, text_pair, encoding_a, encoding_b, written_mask(a), written_mask(b),
                                no_word_ids(a), no_word_ids(b))
        states_a = alignment.pool_states(states_a, "a")                          # (L_a+1, W, H_a)
        states_b = alignment.pool_states(states_b, "b")                          # (L_b+1, W, H_b)
        tokens = alignment.texts
    else:
        _check_same_tokens(a, b, ids_a, ids_b)
    plain, cka = cka_matrices(states_a, states_b)                               # (L_a+1, L_b+1) each
    width = max(states_a.shape[-1], states_b.shape[-1])
    cosine = None
    if states_a.shape == states_b.shape:
        cosine = torch.nn.functional.cosine_similarity(states_a, states_b, dim=-1).mean(-1).numpy()   # (L+1,)
    masks: list = []
    if "mlm" in a.heads and "mlm" in b.heads and _has_mask(a, ids_a) and _has_mask(b, ids_b):
        cancellation.check()
        masks = (_mask_comparisons(a, b, text, text_pair, top_k) if alignment is None
                 else compare_fillers_by_words(a, b, alignment, text, text_pair, top_k))
    return ModelComparison(text=text, source_a=a.source, source_b=b.source, tokens=tokens, cka=cka,
                           plain_cka=plain, cosine=cosine, attention_a=attention_a, attention_b=attention_b,
                           masks=masks, alignment=alignment, width=width, few=few_samples(len(tokens), (width,)))


def no_word_ids(loaded: LoadedModel) -> frozenset[int]:
    """The ids that are no word where typed in a text: the special tokens but the mask and the unknown piece
    (which stand for text)."""
    tokenizer = loaded.tokenizer
    return frozenset(tokenizer.special_ids() - {tokenizer.mask_token_id, tokenizer.unk_token_id})


def _has_mask(loaded: LoadedModel, ids: Sequence[int]) -> bool:
    """Whether the input holds ``loaded``'s mask token."""
    mask = loaded.tokenizer.mask_token_id
    return mask is not None and mask in ids
