"""The Embeddings view: how word, segment and position embeddings add up, and what they learned.

``embeddings(loaded, text, text_pair)`` encodes the text (a pair in the tokenizer's own layout) and returns an
:class:`EmbeddingsResult` (numpy only, no tensors) with, per token, the summands the family adds (word, position,
segment; ``components``: no segment row without a token-type table), their sum before LayerNorm and the embedding
output after it (equal to the model's own ``hidden_states[0]`` in eval mode, after ALBERT's and ELECTRA's
projection to the hidden width); the learned position embeddings' cosine-similarity matrix and a 2-D PCA of them
(``position_similarity``: RoBERTa's rows start after its padding id); the segment B - A vector; each token's
nearest vocabulary neighbours by cosine of the input embeddings (one batched matmul over the vocabulary); and a
2-D PCA of the tokens' contextual vectors at one layer. ``embeddings_forward`` keeps every layer's hidden states
too, so ``at_layer`` gives another layer's view without a model run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F

from engine.model.loaded_model import LoadedModel
from engine.checks import require_int
from engine.model.embeddings import position_ids_for
from engine.probes.representations.position_similarity import check_positions, cosine_matrix, position_rows
from engine.text.segment_ids import uses_segment_ids

COMPONENTS = ("word", "position", "segment", "sum", "output")
COMPONENT_TITLES = {
    "word": "word (token) embedding",
    "position": "position embedding",
    "segment": "segment (token type) embedding",
    "sum": "sum before LayerNorm",
    "output": "embedding output (after LayerNorm)",
}
DEFAULT_NEIGHBOURS = 8
MAX_NEIGHBOURS = 100


@dataclass
class Repeat:
    """A word piece that occurs more than once: how alike its first two occurrences are."""

    token: str
    positions: list[int]             # every position it occurs at
    output_cosine: float             # cosine of the embedding outputs (word + position + segment, LayerNorm)
    contextual_cosine: float         # cosine of the hidden states at the chosen layer
    cosine_by_layer: list[float]     # cosine of the hidden states at layers 0..L


@dataclass
class EmbeddingsResult:
    """Everything the Embeddings tab draws for one input on one model. S tokens, H hidden, k neighbours."""

    text: str
    text_pair: str | None
    source: str                      # which model (LoadedModel.source)
    tokens: list[str]
    input_ids: np.ndarray            # (S,) int64
    token_type_ids: np.ndarray       # (S,) int64
    position_ids: np.ndarray         # (S,) int64
    segments: list[str]              # "A", "B" or "special" per token
    word: np.ndarray                 # (S, H) word (token) embeddings
    position: np.ndarray             # (S, H) position embeddings
    segment: np.ndarray              # (S, H) segment (token type) embeddings
    summed: np.ndarray               # (S, H) word + position + segment, before LayerNorm
    output: np.ndarray               # (S, H) LayerNorm(summed): the embedding output
    norms: dict[str, np.ndarray]     # component name (COMPONENTS) -> (S,) L2 norms
    output_max_diff: float           # max |output - the model's own hidden_states[0]|
    num_positions: int               # P (0 without a position table: ModernBERT, DeBERTa)
    position_similarity: np.ndarray  # (P, P) cosine similarity of the learned position embeddings
    position_pca: np.ndarray         # (P, 2)
    position_pca_variance: np.ndarray  # (2,) explained-variance ratios
    segment_difference: np.ndarray | None  # (H,) segment embedding B - A (None with one segment type)
    segment_difference_norm: float | None
    segment_cosine: float | None     # cosine of the segment A and B embeddings
    neighbour_ids: np.ndarray        # (S, k) nearest vocabulary ids, best first, never the token itself
    neighbour_tokens: list[list[str]]
    neighbour_scores: np.ndarray     # (S, k) cosine similarities
    layer: int                       # 0 = embedding output .. num_layers
    num_layers: int
    contextual: np.ndarray           # (S, H) hidden states at ``layer``
    contextual_pca: np.ndarray       # (S, 2)
    contextual_pca_variance: np.ndarray  # (2,)
    max_length: int
    truncated: bool
    num_truncated_tokens: int
    repeats: list[Repeat] = field(default_factory=list)
    components: tuple[str, ...] = COMPONENTS   # the summands the family adds (no "segment" without segment ids)
    projected_to: int | None = None  # ALBERT, ELECTRA: the output (E wide) is projected to this width H
    def component(self, name: str) -> np.ndarray:
        """The (S, H) array of one of ``COMPONENTS``."""
        arrays = {"word": self.word, "position": self.position, "segment": self.segment,
                  "sum": self.summed, "output": self.output}
        if name not in arrays:
            raise ValueError(f"unknown component {name!r}; choose one of {', '.join(COMPONENTS)}")
        return arrays[name]


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centered PCA of the rows of ``x`` (N, D): ((N, 2) coordinates, (2,) explained-variance ratios).

    Deterministic sign: each component's largest-magnitude loading is positive. Missing
    components (N < 3 or D < 2) are zero columns.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"PCA needs a 2-D array, got shape {x.shape}")
    coords = np.zeros((x.shape[0], 2))
    ratios = np.zeros(2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        return coords, ratios
    centered = torch.from_numpy(x - x.mean(axis=0, keepdims=True))         # (N, D)
    # The SVD through the eigenvectors of the smaller Gram matrix (min(N, D) square): the same
    # components, and a multi-threaded LAPACK SVD can be 100x slower on a busy 2-core machine.
    if centered.shape[0] <= centered.shape[1]:
        values, vectors = torch.linalg.eigh(centered @ centered.T)         # (N,), (N, N): left singular vectors
        loadings = centered.T @ vectors                                    # (D, N), columns scaled by s_i
    else:
        values, loadings = torch.linalg.eigh(centered.T @ centered)        # (D,), (D, D): right singular vectors
    values, loadings = values.flip(0).clamp_min(0), loadings.flip(1)       # largest first
    total = float(values.sum())
    for c in range(min(2, values.shape[0])):
        if total <= 0 or values[c] <= 1e-12 * total:
            break                                                          # no variance left
        loading = loadings[:, c] / loadings[:, c].norm()                   # (D,) unit
        if loading[loading.abs().argmax()] < 0:
            loading = -loading
        coords[:, c] = (centered @ loading).numpy()                        # (N,)
        ratios[c] = float(values[c]) / total
    return coords, ratios


@dataclass
class EmbeddingsForward:
    """One input's :class:`EmbeddingsResult` and every layer's hidden states: another layer's view
    (:func:`at_layer`) needs no model run (the app's forward cache keeps these)."""

    result: EmbeddingsResult
    hidden: np.ndarray               # (L + 1, S, H) float32


def at_layer(forward: EmbeddingsForward, layer: int) -> EmbeddingsResult:
    """``forward``'s result with its contextual view (hidden states, their PCA, repeats' cosine) at ``layer``."""
    layer = _check_layer(layer, forward.result.num_layers)
    contextual = forward.hidden[layer]                                         # (L + 1, S, H) -> (S, H)
    coords, ratios = pca_2d(contextual)
    repeats = [replace(r, contextual_cosine=r.cosine_by_layer[layer]) for r in forward.result.repeats]
    return replace(forward.result, layer=layer, contextual=contextual, contextual_pca=coords,
                   contextual_pca_variance=ratios, repeats=repeats)


def embeddings(loaded: LoadedModel, text: str, text_pair: str | None = None, layer: int | None = None,
               max_length: int | None = None, neighbours: int = DEFAULT_NEIGHBOURS,
               positions: int | None = None) -> EmbeddingsResult:
    """Decompose the embedding of ``text`` (and ``text_pair``) on ``loaded`` (see the module doc). ``layer``: the
    hidden states for the contextual PCA (0 = embedding output, default the last layer); ``max_length`` truncates
    the input (default and upper bound: the model's positions); ``neighbours``: vocabulary neighbours per token;
    ``positions``: learned positions the similarity matrix and its PCA cover (default min(P_max, 128))."""
    return embeddings_forward(loaded, text, text_pair, layer, max_length, neighbours, positions).result


def embeddings_forward(loaded: LoadedModel, text: str, text_pair: str | None = None, layer: int | None = None,
                       max_length: int | None = None, neighbours: int = DEFAULT_NEIGHBOURS,
                       positions: int | None = None) -> EmbeddingsForward:
    """:func:`embeddings` (same arguments) with every layer's hidden states kept for :func:`at_layer`."""
    config = loaded.config
    tokenizer = loaded.require_tokenizer()
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty: type a sentence to embed")
    pair = text_pair if text_pair and text_pair.strip() else None
    num_layers = config.num_hidden_layers
    layer = _check_layer(num_layers if layer is None else layer, num_layers)
    limit = config.max_tokens                  # positions less RoBERTa's offset
    max_length = limit if max_length is None else max_length
    require_int(max_length, "max_length", numpy_ints=True)
    if max_length > limit:
        raise ValueError(f"max_length {max_length} is longer than this model's {limit} positions")
    max_length = int(max_length)
    require_int(neighbours, "neighbours", numpy_ints=True)
    if not 1 <= neighbours <= MAX_NEIGHBOURS:
        raise ValueError(f"neighbours must be between 1 and {MAX_NEIGHBOURS}, got {neighbours}")
    num_positions = check_positions(loaded, positions)

    encoding = tokenizer.encode(text, pair, max_length=max_length)
    model = loaded.model
    emb = model.bert.embeddings
    device = next(model.parameters()).device
    input_ids = torch.tensor([encoding.input_ids], device=device)              # (1, S)
    segments_in = uses_segment_ids(config, tokenizer)                          # RoBERTa, DistilBERT: zeros / none
    token_type_ids = (torch.tensor([encoding.token_type_ids], device=device) if segments_in
                      else torch.zeros_like(input_ids))                         # (1, S)
    position_ids = position_ids_for(input_ids, config.position_offset, config.pad_token_id)   # (1, S)
    with torch.inference_mode():
        word, position, segment = emb.parts(input_ids, token_type_ids, position_ids)  # 3 x (1, S, E)
        summed = word + segment + position                                     # (1, S, E), the forward's order
        output = emb.finish(summed)                                            # (1, S, E): LayerNorm(sum)
        encoded = model.bert(input_ids, attention_mask=torch.ones_like(input_ids), token_type_ids=token_type_ids,
                             output_hidden_states=True)
        hidden = torch.stack(encoded.hidden_states)[:, 0].float()              # (L + 1, S, H)
        project = getattr(model.bert, "embeddings_project", None)              # ALBERT, ELECTRA: E -> H
        entering = project(output) if project is not None else output          # (1, S, H): what layer 1 reads
        output_max_diff = float((entering[0] - hidden[0]).abs().max())
        parts = {"word": word[0], "position": position[0], "segment": segment[0], "sum": summed[0],
                 "output": output[0]}                                          # each (S, E)
        norms = {name: value.float().norm(dim=-1).cpu().numpy() for name, value in parts.items()}  # (S,)
        learned = position_rows(loaded, num_positions)                        # (P, E); (0, E): no table
        pos_sim = cosine_matrix(learned)                                       # (P, P)
        neighbour_ids, neighbour_scores = _neighbours(emb.word_embeddings.weight, input_ids[0], neighbours)
        seg_diff, seg_norm, seg_cos = (_segment_difference(emb.token_type_embeddings.weight) if segments_in
                                       else (None, None, None))
        repeats = _repeats(encoding, hidden, layer, tokenizer)
        position_pca, position_var = pca_2d(learned.float().cpu().numpy())
        contextual = hidden[layer].cpu().numpy()                               # (S, H)
    contextual_pca, contextual_var = pca_2d(contextual)
    neighbour_ids = neighbour_ids.cpu().numpy()
    result = EmbeddingsResult(
        text=text, text_pair=pair, source=loaded.source, tokens=list(encoding.shown),
        input_ids=np.asarray(encoding.input_ids, dtype=np.int64),
        token_type_ids=np.asarray(encoding.token_type_ids, dtype=np.int64),
        position_ids=position_ids[0].cpu().numpy().astype(np.int64), segments=_segments(encoding),
        word=_numpy(parts["word"]), position=_numpy(parts["position"]), segment=_numpy(parts["segment"]),
        summed=_numpy(parts["sum"]), output=_numpy(parts["output"]), norms=norms,
        output_max_diff=output_max_diff, num_positions=learned.shape[0],
        position_similarity=pos_sim.cpu().numpy(), position_pca=position_pca, position_pca_variance=position_var,
        segment_difference=seg_diff, segment_difference_norm=seg_norm, segment_cosine=seg_cos,
        neighbour_ids=neighbour_ids,
        neighbour_tokens=[[_piece(tokenizer, int(i)) for i in row] for row in neighbour_ids],
        neighbour_scores=neighbour_scores.cpu().numpy(), layer=layer, num_layers=num_layers,
        contextual=contextual, contextual_pca=contextual_pca, contextual_pca_variance=contextual_var,
        max_length=max_length, truncated=encoding.truncated, num_truncated_tokens=encoding.num_truncated_tokens,
        repeats=repeats, components=_components(emb),
        projected_to=config.hidden_size if project is not None else None,
    )
    return EmbeddingsForward(result, hidden.cpu().numpy())


# --- internals ---

def _check_layer(layer: int, num_layers: int) -> int:
    require_int(layer, "layer", numpy_ints=True)
    if not 0 <= layer <= num_layers:
        raise ValueError(f"layer {layer} is out of range: this model has {num_layers} layers "
                         f"(0 = embedding output .. {num_layers} = last layer)")
    return int(layer)


def _components(emb) -> tuple[str, ...]:
    """The summands this family adds, then the sum and the output: no position row without a position table
    (ModernBERT's rotary and DeBERTa's relative positions enter inside attention), no segment row without a
    token-type table (DistilBERT; RoBERTa's one row is a constant vector every token gets)."""
    tables = {"position": emb.position_embeddings, "segment": emb.token_type_embeddings}
    return tuple(name for name in COMPONENTS if tables.get(name, True) is not None)


def _numpy(x: torch.Tensor) -> np.ndarray:
    return x.float().cpu().numpy()


def _segments(encoding) -> list[str]:
    """"A", "B" or "special" per token, by which text it comes from (RoBERTa's tokenizers give no type ids)."""
    return ["special" if special or sequence is None else ("A" if sequence == 0 else "B")
            for special, sequence in zip(encoding.special_tokens_mask, encoding.sequence_ids)]


def _neighbours(table: torch.Tensor, ids: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k vocabulary rows by cosine to each id's row, the id itself excluded: ((S, k) ids, (S, k) scores)."""
    vocab_size = table.shape[0]
    k = min(k, vocab_size - 1)
    unique, inverse = torch.unique(ids, return_inverse=True)                   # (U,), (S,)
    table = table.float()                                                      # (V, H)
    lengths = torch.linalg.vector_norm(table, dim=-1).clamp_min(1e-12)         # (V,)
    sims = table[unique] @ table.T                                             # (U, V) dot products
    sims /= lengths[unique, None] * lengths[None, :]                           # (U, V) cosines
    sims[torch.arange(unique.shape[0], device=sims.device), unique] = float("-inf")  # never itself
    scores, found = sims.topk(k, dim=-1)                                       # (U, k)
    return found[inverse], scores[inverse]                                     # (S, k)


def _segment_difference(table: torch.Tensor) -> tuple[np.ndarray | None, float | None, float | None]:
    if table.shape[0] < 2:
        return None, None, None
    a, b = table[0].float(), table[1].float()                                  # (H,)
    diff = b - a
    return diff.cpu().numpy(), float(diff.norm()), float(F.cosine_similarity(a, b, dim=0))


def _repeats(encoding, hidden: torch.Tensor, layer: int, tokenizer) -> list[Repeat]:
    """Non-special pieces occurring twice or more, compared at their first two occurrences."""
    where: dict[int, list[int]] = {}
    for position, (token_id, special) in enumerate(zip(encoding.input_ids, encoding.special_tokens_mask)):
        if not special:
            where.setdefault(token_id, []).append(position)
    found = []
    for token_id, positions in where.items():
        if len(positions) < 2:
            continue
        p, q = positions[:2]
        by_layer = F.cosine_similarity(hidden[:, p], hidden[:, q], dim=-1)    # (L + 1,)
        found.append(Repeat(token=_piece(tokenizer, token_id), positions=positions,
                            output_cosine=float(by_layer[0]), contextual_cosine=float(by_layer[layer]),
                            cosine_by_layer=[float(c) for c in by_layer]))
    return found


def _piece(tokenizer, token_id: int) -> str:
    """The vocabulary piece, or ``"<id N>"`` for an id the model has but the tokenizer lacks."""
    try:
        return tokenizer.id_to_token(token_id)
    except (IndexError, KeyError, ValueError):
        return f"<id {token_id}>"
