"""The learned position embeddings compared with each other: the cosine-similarity matrix of the first ``P``
positions a text can take (RoBERTa's rows start after its padding id), and that matrix per checkpoint of a run,
so one sees the position embeddings take shape during training (the Embeddings tab's *Over training*)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.checks import require_int

DEFAULT_POSITIONS = 128


@dataclass
class PositionSimilarity:
    """The learned position embeddings' cosine similarities (first ``P`` positions) of one model."""

    label: str
    matrix: np.ndarray               # (P, P)
    adjacent: float                  # mean cosine of positions p and p + 1
    distant: float                   # mean cosine of positions at least P // 2 apart


def cosine_matrix(x: torch.Tensor) -> torch.Tensor:
    """(N, D) -> (N, N) cosine similarities (zero rows give 0)."""
    unit = F.normalize(x.float(), dim=-1)                                  # (N, D)
    return unit @ unit.T                                                   # (N, N)


def position_similarity(loaded: LoadedModel, positions: int | None = None,
                        label: str | None = None) -> PositionSimilarity:
    """Cosine similarity of the first ``positions`` learned position embeddings (default up to 128)."""
    num = check_positions(loaded, positions)
    with torch.inference_mode():
        matrix = cosine_matrix(position_rows(loaded, num)).cpu().numpy()  # (P, P)
    return _summarise_positions(label or loaded.source, matrix)


def embeddings_over_checkpoints(models: Sequence[tuple[str, LoadedModel]],
                                positions: int = 64) -> list[PositionSimilarity]:
    """The position-similarity matrix of each ``(label, model)``, in the order given; all cover the same first
    ``P = min(positions, smallest usable length)`` positions, so they compare cell by cell."""
    if not models:
        raise ValueError("no checkpoints given to compare")
    require_int(positions, "positions", numpy_ints=True)
    if positions < 2:
        raise ValueError(f"positions must be at least 2, got {positions}")
    num = min([positions] + [m.config.max_tokens for _, m in models])
    found = []
    for label, m in models:
        cancellation.check()                                          # between checkpoints
        found.append(position_similarity(m, num, label))
    return found


def check_positions(loaded: LoadedModel, positions: int | None) -> int:
    """``positions`` (default min(the model's usable positions, 128)) checked against the model."""
    limit = loaded.config.max_tokens
    if positions is None:
        return min(limit, DEFAULT_POSITIONS)
    require_int(positions, "positions", numpy_ints=True)
    if not 2 <= positions <= limit:
        raise ValueError(f"positions must be between 2 and this model's {limit} positions, got {positions}")
    return int(positions)


def position_rows(loaded: LoadedModel, num: int) -> torch.Tensor:
    """The learned position embeddings of the first ``num`` positions a text can take: (P, E); RoBERTa's rows
    start after its padding id (``position_offset``); none (0, E) for a model without a position table."""
    offset = loaded.config.position_offset
    table = loaded.model.bert.embeddings.position_embeddings
    if table is None:                   # ModernBERT, DeBERTa: positions enter inside attention
        return loaded.model.bert.embeddings.word_embeddings.weight[:0]                   # (0, E)
    return table.weight[offset:offset + num]                                            # (P, E)


def _summarise_positions(label: str, matrix: np.ndarray) -> PositionSimilarity:
    num = matrix.shape[0]
    adjacent = float(np.diagonal(matrix, offset=1).mean()) if num > 1 else float("nan")
    gap = np.abs(np.arange(num)[:, None] - np.arange(num)[None, :])            # (P, P)
    far = matrix[gap >= max(1, num // 2)]
    return PositionSimilarity(label=label, matrix=matrix, adjacent=adjacent,
                              distant=float(far.mean()) if far.size else float("nan"))
