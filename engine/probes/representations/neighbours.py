"""Nearest contextual neighbours (exBERT's idea): which tokens of a corpus does the model represent most
like this token, in this sentence, at this layer?

``build_index(loaded, sentences, layer)`` runs the model over every sentence (batched, padded, each one
alone as ``[CLS] sentence [SEP]``) and keeps the layer's vector of every word piece (not ``[CLS]``,
``[SEP]`` or padding), L2-normalised, with where it came from. ``nearest(index, loaded, text, position)``
takes the same layer's vector of one token of a new input and returns the ``k`` corpus tokens of highest
cosine similarity, best first, each in its sentence.

The search is one matrix product and a top-k in torch: exact, and at the sizes this serves (up to 5,000
sentences, about 10⁵ vectors of 384 floats) within 5% of ``faiss``' exact inner-product index from 50k vectors
up, 0.4 ms behind it at 10k (``bench/neighbours.py``; figures in docs/BENCHMARKS.md), so no extra dependency.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.checks import is_int
from engine.probes.attention.maps import encode_input, model_inputs

MAX_SENTENCES = 5000          # an index holds at most this many sentences
MAX_SENTENCE_TOKENS = 64      # longer sentences are cut (pieces, specials included)
BATCH_SIZE = 32
Progress = Callable[[int, int], None]


@dataclass
class ContextIndex:
    """The contextual vectors of a corpus at one layer of one model."""

    source: str                   # the model (LoadedModel.source)
    layer: int                    # 0 = the embeddings' output, i = after encoder layer i
    sentences: list[str]
    sentence_tokens: list[list[str]]      # each sentence's pieces, specials included
    vectors: torch.Tensor         # (N, H) float32, unit length
    sentence_of: np.ndarray       # (N,) which sentence each vector comes from
    position_of: np.ndarray       # (N,) its token position in that sentence
    span_of: np.ndarray           # (N, 2) its characters [start, end) in that sentence

    def __len__(self) -> int:
        return int(self.vectors.shape[0])


@dataclass(frozen=True)
class Neighbour:
    """One corpus token close to the query token."""

    score: float                  # cosine similarity
    token: str
    sentence: int                 # index into the index's sentences
    position: int                 # token position within that sentence's pieces
    text: str                     # the sentence
    start: int                    # the token's characters in ``text``: text[start:end]
    end: int


@dataclass
class NeighbourResult:
    """The query token and its neighbours, best first."""

    tokens: list[str]             # the query input's pieces
    position: int
    token: str
    layer: int
    neighbours: list[Neighbour]


def check_layer(loaded: LoadedModel, layer: int) -> int:
    """``layer`` as an int in 0..num_hidden_layers, or a ``ValueError`` naming the range."""
    count = loaded.config.num_hidden_layers
    if not is_int(layer, numpy_ints=True) or not 0 <= int(layer) <= count:
        raise ValueError(f"layer must be 0 (the embeddings) to {count} (the last layer), got {layer!r}")
    return int(layer)


def _layer_states(loaded: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  token_type_ids: torch.Tensor, layer: int) -> torch.Tensor:
    """The hidden states after ``layer``: (B, S, H) float32."""
    with torch.inference_mode():
        out = loaded.model.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                output_hidden_states=True)
    return out.hidden_states[layer].float()


def build_index(loaded: LoadedModel, sentences: Sequence[str], layer: int, progress: Progress | None = None,
                batch_size: int = BATCH_SIZE) -> ContextIndex:
    """Index every word piece of ``sentences`` at ``layer`` (see the module docstring). ``progress(done, total)``
    after each batch. ``ValueError`` for no sentences, more than ``MAX_SENTENCES``, or a bad layer."""
    layer = check_layer(loaded, layer)
    loaded.require_tokenizer("so it cannot read a corpus")
    sentences = [s.strip() for s in sentences if s and s.strip()]
    if not sentences:
        raise ValueError("the corpus has no sentences to index")
    if len(sentences) > MAX_SENTENCES:
        raise ValueError(f"the corpus has {len(sentences):,} sentences; an index holds at most {MAX_SENTENCES:,}")
    tokenizer, device = loaded.tokenizer, next(loaded.model.parameters()).device
    limit = min(MAX_SENTENCE_TOKENS, loaded.config.max_tokens)
    vectors, sentence_of, position_of, spans, all_tokens = [], [], [], [], []
    for start in range(0, len(sentences), batch_size):
        cancellation.check()                                  # between batches: a cancelled build stops here
        encodings = tokenizer.encode_batch(sentences[start:start + batch_size], max_length=limit)
        width = max(len(e.input_ids) for e in encodings)
        ids = torch.full((len(encodings), width), tokenizer.pad_token_id, dtype=torch.long)      # (B, S)
        mask = torch.zeros((len(encodings), width), dtype=torch.long)                            # (B, S)
        for row, encoding in enumerate(encodings):
            ids[row, :len(encoding.input_ids)] = torch.tensor(encoding.input_ids)
            mask[row, :len(encoding.input_ids)] = 1
        states = _layer_states(loaded, ids.to(device), mask.to(device), torch.zeros_like(ids).to(device), layer)
        for row, encoding in enumerate(encodings):
            keep = [i for i, special in enumerate(encoding.special_tokens_mask) if not special]
            vectors.append(states[row, keep].cpu())                                              # (k, H)
            sentence_of += [start + row] * len(keep)
            position_of += keep
            spans += [encoding.offsets[i] for i in keep]
            all_tokens.append(list(encoding.shown))
        if progress is not None:
            progress(min(start + batch_size, len(sentences)), len(sentences))
    matrix = torch.nn.functional.normalize(torch.cat(vectors), dim=-1)                            # (N, H)
    return ContextIndex(loaded.source, layer, sentences, all_tokens, matrix, np.asarray(sentence_of),
                        np.asarray(position_of), np.asarray(spans, dtype=np.int64).reshape(-1, 2))


def query_vector(loaded: LoadedModel, text: str, position: int, layer: int) -> tuple[list[str], torch.Tensor]:
    """The input's pieces and the unit vector of the piece at ``position`` after ``layer``: (H,)."""
    encoding = encode_input(loaded, text)
    tokens = list(encoding.shown)
    if not is_int(position, numpy_ints=True) or not 0 <= position < len(tokens):
        raise ValueError(f"token position must be 0 to {len(tokens) - 1} (the input has {len(tokens)} pieces), "
                         f"got {position!r}")
    ids, types = model_inputs(loaded, encoding)
    states = _layer_states(loaded, ids, torch.ones_like(ids), types, check_layer(loaded, layer))   # (1, S, H)
    return tokens, torch.nn.functional.normalize(states[0, int(position)].cpu(), dim=-1)


def nearest(index: ContextIndex, loaded: LoadedModel, text: str, position: int, k: int = 10) -> NeighbourResult:
    """The ``k`` corpus tokens whose vectors at the index's layer are most like the input's token at
    ``position`` (cosine similarity), best first. The model must be the one the index was built with."""
    if loaded.source != index.source:
        raise ValueError(f"the index was built with {index.source}, not {loaded.source}: build it again for "
                         "this model")
    if not is_int(k, numpy_ints=True) or not 1 <= k <= 100:
        raise ValueError(f"k must be 1 to 100, got {k!r}")
    tokens, query = query_vector(loaded, text, position, index.layer)
    scores = index.vectors @ query                                                   # (N,)
    values, picks = scores.topk(min(int(k), len(index)))                             # (k,) each
    found = []
    for score, pick in zip(values.tolist(), picks.tolist()):
        sentence, at = int(index.sentence_of[pick]), int(index.position_of[pick])
        start, end = (int(v) for v in index.span_of[pick])
        found.append(Neighbour(float(score), index.sentence_tokens[sentence][at], sentence, at,
                               index.sentences[sentence], start, end))
    return NeighbourResult(tokens, int(position), tokens[int(position)], index.layer, found)
