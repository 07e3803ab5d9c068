"""Pure figure builders for the neuron view: one query token's row of one head, number by number.

Plain data in (numpy vectors from ``engine.probes.attention.neuron_view``), plotly out; no Gradio, no tensor
math. Keys are placed **by position** (rows 0..S-1 labelled ``position: token``), hidden dimensions
run across (0..hd-1). Vectors and products use a diverging scale centred on 0 (blue negative, red
positive); the softmax weights are bars in a blue of the attention heatmap's scale: that token's
row of the heatmap.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.attention.plots import compact
from explorer.formatting import sig
from explorer.plots import empty_figure, figure, plotly_text, subplot_grid, tick_labels

DIVERGING: list[tuple[float, str]] = [(0.0, "#2563eb"), (0.5, "#f1f5f9"), (1.0, "#dc2626")]   # blue, pale, red
UP, DOWN = "#dc2626", "#2563eb"
WEIGHT = "#2171b5"             # a mid blue of the attention heatmap's scale


def _labels(tokens: Sequence[str], masked: Sequence[bool] | None = None) -> list[str]:
    return [f"{i}: {plotly_text(t)}" + (" (padding)" if masked is not None and masked[i] else "")
            for i, t in enumerate(tokens)]


def _symmetric(*arrays: np.ndarray) -> float:
    largest = max((float(np.abs(a).max()) for a in arrays if a.size), default=0.0)
    return largest if largest > 0 else 1.0


def vectors_figure(tokens: Sequence[str], query: int, query_vector: np.ndarray, key_vectors: np.ndarray,
                   products: np.ndarray, masked: Sequence[bool] | None = None, title: str | None = None) -> go.Figure:
    """Three heatmaps over the hidden dimensions: the query vector q (one row), every key k_j (a row per key
    token) and the element-wise products q ⊙ k_j (a row per key token). A score is the sum of a product row
    over √head_size."""
    q, keys, prods = (np.asarray(a, dtype=float) for a in (query_vector, key_vectors, products))
    n = len(tokens)
    if n == 0 or q.size == 0:
        return empty_figure("No tokens")
    if keys.shape != (n, q.size) or prods.shape != (n, q.size):
        raise ValueError(f"keys {keys.shape} and products {prods.shape} must be ({n}, {q.size}): one row per token")
    if not 0 <= query < n:
        raise ValueError(f"query position {query} is outside the {n} tokens")
    labels = _labels(tokens, masked)
    dims = list(range(q.size))
    size, product_size = _symmetric(q, keys), _symmetric(prods)
    rows = list(range(n))
    key_axis = dict(tickmode="array", tickvals=rows, ticktext=labels, autorange="reversed", title="key")
    heat = dict(type="heatmap", x=dims, hoverongaps=False)
    traces = [
        dict(heat, z=compact(q[None, :]), y=[0], coloraxis="coloraxis", customdata=[[labels[query]] * q.size],
             hovertemplate="query %{customdata}<br>dimension %{x}<br>q = %{z:.3f}<extra></extra>",
             xaxis="x", yaxis="y"),
        dict(heat, z=compact(keys), y=rows, coloraxis="coloraxis", customdata=[[label] * q.size for label in labels],
             hovertemplate="key %{customdata}<br>dimension %{x}<br>k = %{z:.3f}<extra></extra>", xaxis="x2",
             yaxis="y2"),
        dict(heat, z=compact(prods), y=rows, coloraxis="coloraxis2", customdata=[[label] * q.size for label in labels],
             hovertemplate="key %{customdata}<br>dimension %{x}<br>q × k = %{z:.3f}<extra></extra>", xaxis="x3",
             yaxis="y3"),
    ]
    band = 1.0 / (2 * n + 1)                                # the query row gets one key row's height
    gap = 0.06
    tall = (1 - 2 * gap - band) / 2
    layout = dict(
        title=dict(text=title) if title else None, height=min(1400, 260 + 36 * (2 * n + 1)),
        margin=dict(l=20, r=20, t=60 if title else 30, b=40),
        xaxis=dict(domain=[0, 1], anchor="y", showticklabels=False),
        yaxis=dict(domain=[1 - band, 1], tickmode="array", tickvals=[0], ticktext=[f"q · {labels[query]}"],
                   fixedrange=True),
        xaxis2=dict(domain=[0, 1], anchor="y2", matches="x", showticklabels=False),
        yaxis2=dict(key_axis, domain=[1 - band - gap - tall, 1 - band - gap], title="key k_j"),
        xaxis3=dict(domain=[0, 1], anchor="y3", matches="x", title="hidden dimension of the head"),
        yaxis3=dict(key_axis, domain=[0, tall], title="q ⊙ k_j"),
        coloraxis=dict(colorscale=DIVERGING, cmin=-size, cmax=size, colorbar=dict(title="q, k", thickness=10,
                                                                                      y=0.78, len=0.45)),
        coloraxis2=dict(colorscale=DIVERGING, cmin=-product_size, cmax=product_size,
                        colorbar=dict(title="q × k", thickness=10, y=0.22, len=0.45)),
    )
    return figure(traces, **layout)


def scores_figure(tokens: Sequence[str], query: int, scores: Sequence[float], weights: Sequence[float],
                  masked: Sequence[bool] | None = None, title: str | None = None) -> go.Figure:
    """Two bar rows over the key tokens: the scaled dot products q·k_j/√d (red positive, blue negative;
    padded keys grey) and their softmax (the head's row: the weights sum to 1)."""
    n = len(tokens)
    if len(scores) != n or len(weights) != n:
        raise ValueError(f"{len(scores)} scores and {len(weights)} weights for {n} tokens")
    if n == 0:
        return empty_figure("No tokens")
    masked = [bool(m) for m in masked] if masked is not None else [False] * n
    labels = _labels(tokens, masked)
    xs = list(range(n))
    tickvals, ticktext = tick_labels(tokens)
    axis = dict(tickmode="array", tickvals=tickvals, ticktext=ticktext, range=[-0.5, n - 0.5],
                tickangle=-60 if n > 12 else 0)
    score_colors = ["#9aa0a6" if m else (UP if s > 0 else DOWN) for s, m in zip(scores, masked)]
    traces = [
        dict(type="bar", x=xs, y=compact(scores), marker=dict(color=score_colors, line=dict(width=0)),
             customdata=[[label, sig(float(s))] for label, s in zip(labels, scores)], showlegend=False,
             hovertemplate="key %{customdata[0]}<br>q·k/√d = %{customdata[1]}<extra></extra>", xaxis="x", yaxis="y"),
        dict(type="bar", x=xs, y=compact(weights), marker=dict(color=WEIGHT, line=dict(width=0)),
             customdata=[[label] for label in labels], showlegend=False,
             hovertemplate="key %{customdata[0]}<br>weight %{y:.3f}<extra></extra>", xaxis="x2", yaxis="y2"),
    ]
    query_name = f"{query}: {plotly_text(tokens[query])}" if 0 <= query < n else str(query)
    layout = subplot_grid(2, 1, titles=[f"scaled dot products q·k/√d (query {query_name})",
                                        "softmax: the head's attention row (sums to 1)"], vertical_spacing=0.22,
                          x=dict(axis, showticklabels=False), x2=dict(axis, title="key token"),
                          y=dict(title="score", zeroline=True), y2=dict(title="weight", rangemode="tozero"))
    layout.update(title=dict(text=title) if title else None, height=460, bargap=0.15,
                  margin=dict(l=20, r=20, t=70 if title else 40, b=40))
    return figure(traces, **layout)
