"""Pure plot builders for the Embeddings tab: plain lists / numpy arrays in, plotly figures out.

Tokens are plotted by position with the token text as tick labels (``plots.tick_labels``),
so repeated tokens stay separate. No Gradio and no tensor math here.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.formatting import percent, sig
from explorer.plots import (SEGMENT_COLORS, SEGMENT_NAMES, category_colors, empty_figure, figure, plotly_text,
                            tick_labels)

COMPONENT_LABELS: dict[str, str] = {
    "word": "word (token)",
    "position": "position",
    "segment": "segment (token type)",
    "sum": "sum before LayerNorm",
    "output": "after LayerNorm (embedding output)",
}
COMPONENT_COLORS: dict[str, str] = category_colors(tuple(COMPONENT_LABELS))
NEIGHBOUR_COLUMNS = ["position", "token", "rank", "neighbour", "id", "cosine"]
SIMILARITY_SCALE = "RdBu_r"
_MAX_POINT_LABELS = 64
OUTLIER_FENCE = 3.0            # a PCA point beyond Q1/Q3 -+ this many IQRs is drawn on the plot's edge
MAX_OFF_SCALE_NOTES = 4        # off-scale points named one by one; beyond this, counted
GUIDE_COLOR = "rgba(128,128,128,0.5)"   # the line joining positions: grey that reads on light and dark


def _token_axis(tokens: Sequence[str], title: str = "position") -> dict:
    tickvals, ticktext = tick_labels(list(tokens))
    return dict(title=title, tickmode="array", tickvals=tickvals, ticktext=ticktext,
                tickangle=-60 if len(tokens) > 12 else 0)


def component_norms(tokens: Sequence[str], norms: Mapping[str, Sequence[float]],
                    title: str = "L2 norm of each component, per token") -> go.Figure:
    """Grouped bars: x = position (token tick labels), one bar per component (``norms`` order)."""
    n = len(tokens)
    if n == 0 or not norms:
        return empty_figure("No tokens")
    traces = []
    for name, values in norms.items():
        values = list(values)
        if len(values) != n:
            raise ValueError(f"{name} has {len(values)} norms for {n} tokens")
        traces.append(dict(
            type="bar", x=list(range(n)), y=values, name=COMPONENT_LABELS.get(name, name),
            marker=dict(color=COMPONENT_COLORS.get(name)), customdata=[plotly_text(t) for t in tokens],
            hovertemplate="position %{x} · %{customdata}<br>norm %{y:.3f}<extra>" + COMPONENT_LABELS.get(name, name)
                          + "</extra>"))
    return figure(traces, title=title, barmode="group", height=360, margin=dict(l=50, r=20, t=60, b=40),
                  legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
                  xaxis=dict(range=[-0.5, n - 0.5], **_token_axis(tokens)), yaxis=dict(title="L2 norm"))


def dimensions_heatmap(tokens: Sequence[str], values: np.ndarray, component: str = "output") -> go.Figure:
    """Rows = tokens (by position, top to bottom), columns = hidden dimensions, diverging colours at 0 (the tab
    draws this map on canvas, ``explorer.embeddings.canvas``; this figure is for Python callers)."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] != len(tokens):
        raise ValueError(f"values must be (tokens, hidden) = ({len(tokens)}, H), got {values.shape}")
    if values.size == 0:
        return empty_figure("No tokens")
    n, hidden = values.shape
    # Colour range: the 99th percentile of |value|, so a few outlier dimensions do not wash out the rest
    # (they saturate; hover shows every exact value).
    limit = float(np.quantile(np.abs(values), 0.99)) or float(np.abs(values).max()) or 1.0
    # Rows are categories "position: token" (unique, so repeated tokens keep their own rows); a per-cell
    # customdata of token names would be S x H strings, which plotly copies slowly.
    rows = [f"{i}: {plotly_text(t)}" for i, t in enumerate(tokens)]
    return figure([dict(
        type="heatmap", z=values.astype(np.float32), x=np.arange(hidden), y=rows, colorscale="RdBu_r",
        zmin=-limit, zmax=limit, hovertemplate="%{y}<br>dim %{x}<br>value %{z:.4f}<extra></extra>",
        colorbar=dict(title="value"))],
        title=f"Hidden dimensions: {COMPONENT_LABELS.get(component, component)}",   # short enough for a phone
        height=min(900, max(300, 120 + 22 * n)), margin=dict(l=90, r=20, t=50, b=40),
        xaxis=dict(title="hidden dimension"),
        yaxis=dict(type="category", autorange="reversed", title="position: token",
                   **(dict(tickmode="linear", dtick=1) if n <= 40 else {})))


def position_similarity_heatmap(matrix: np.ndarray, title: str | None = None) -> go.Figure:
    """The P x P cosine similarity of learned position embeddings (-1 blue .. 1 red); the tab draws it on canvas
    (``explorer.embeddings.canvas``), this figure is for Python callers."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"the similarity matrix must be square, got {matrix.shape}")
    if matrix.size == 0:
        return empty_figure("No positions")
    num = matrix.shape[0]
    return figure([dict(type="heatmap", z=matrix.astype(np.float32), x=list(range(num)), y=list(range(num)),
                        colorscale=SIMILARITY_SCALE, zmin=-1, zmax=1, colorbar=dict(title="cosine"),
                        hovertemplate="positions %{y} and %{x}<br>cosine %{z:.3f}<extra></extra>")],
                  title=title or f"Cosine similarity of the first {num} position embeddings",
                  height=460, margin=dict(l=50, r=20, t=50, b=40),
                  xaxis=dict(title="position", constrain="domain"),
                  yaxis=dict(title="position", autorange="reversed", scaleanchor="x", constrain="domain"))


def robust_range(values: np.ndarray, fence: float = OUTLIER_FENCE) -> tuple[float, float]:
    """An axis range for ``values`` that a few far outliers cannot stretch: the min and max of the values
    inside Tukey's fences [Q1 - fence·IQR, Q3 + fence·IQR], plus a 6% margin.

    Without outliers this is the data's range; a point beyond a fence is drawn on the edge instead.
    """
    values = np.asarray(values, dtype=float)
    q1, q3 = np.quantile(values, [0.25, 0.75])
    inside = values[(values >= q1 - fence * (q3 - q1)) & (values <= q3 + fence * (q3 - q1))]
    lo, hi = float(inside.min()), float(inside.max())
    pad = 0.06 * (hi - lo) or 0.5 * max(abs(lo), 1.0)
    return lo - pad, hi + pad


def _off_scale_note(index: int, dx: int, dy: int) -> str:
    arrow = {(1, 0): "→", (-1, 0): "←", (0, 1): "↑", (0, -1): "↓"}.get((dx, dy), "↗↖↘↙"[(dx < 0) + 2 * (dy < 0)])
    return f"position {index}, off scale {arrow}"


def position_pca_scatter(coords: np.ndarray, variance: Sequence[float] | None = None) -> go.Figure:
    """Positions in their first two principal components, coloured by index and joined in order.

    Axis ranges come from :func:`robust_range`, so one far point (often position 0) does not squeeze
    the others into a corner: such a point sits on the plot's edge as an open diamond, named by an
    annotation ("position 0, off scale →"); its hover gives its true coordinates.
    """
    coords = np.asarray(coords, dtype=float)
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise ValueError(f"coords must be (P, 2), got {coords.shape}")
    num = coords.shape[0]
    if num == 0:
        return empty_figure("No positions")
    (x_lo, x_hi), (y_lo, y_hi) = robust_range(coords[:, 0]), robust_range(coords[:, 1])
    shown = np.column_stack([np.clip(coords[:, 0], x_lo, x_hi), np.clip(coords[:, 1], y_lo, y_hi)])   # (P, 2)
    side = np.sign(coords - shown).astype(int)                     # (P, 2): -1 / 0 / 1 off which edge
    off = np.flatnonzero(side.any(axis=1))
    step = max(1, math.ceil(num / 16))
    labels = [str(i) if (i % step == 0 or i == num - 1) and i not in off else "" for i in range(num)]
    hover = [f"position {i}<br>({sig(x)}, {sig(y)})" + (" off scale" if i in off else "")
             for i, (x, y) in enumerate(coords.tolist())]
    is_off = side.any(axis=1)
    symbols = ["diamond-open" if o else "circle" for o in is_off.tolist()]
    notes = [dict(x=shown[i, 0], y=shown[i, 1], text=_off_scale_note(int(i), *side[i].tolist()), showarrow=True,
                  arrowhead=0, ax=-40 * side[i, 0] or 30, ay=30 * side[i, 1] or -24, font=dict(size=11))
             for i in off[:MAX_OFF_SCALE_NOTES]]
    if len(off) > MAX_OFF_SCALE_NOTES:
        notes.append(dict(text=f"{len(off)} positions off scale (diamonds on the edges)", x=0, y=1.02,
                          xref="paper", yref="paper", xanchor="left", yanchor="bottom", showarrow=False))
    axes = _pca_axes(variance)
    axes["xaxis"]["range"], axes["yaxis"]["range"] = [x_lo, x_hi], [y_lo, y_hi]
    return figure([
        dict(type="scatter", x=shown[:, 0], y=shown[:, 1], mode="lines", line=dict(color=GUIDE_COLOR, width=1),
             hoverinfo="skip", showlegend=False),
        dict(type="scatter", x=shown[:, 0], y=shown[:, 1], mode="markers+text", text=labels, textposition="top center",
             marker=dict(color=np.arange(num, dtype=np.float32), colorscale="Viridis", symbol=symbols,
                         size=np.where(is_off, 13, 8).astype(np.float32),
                         line=dict(width=is_off.astype(np.float32) * 3), showscale=True, colorbar=dict(title="position")),
             hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", showlegend=False, cliponaxis=False)],
        title="Position embeddings, 2-D PCA (consecutive positions joined)", height=420, annotations=notes,
        margin=dict(l=50, r=20, t=50, b=40), **axes)


def contextual_pca_scatter(tokens: Sequence[str], segments: Sequence[str], coords: np.ndarray, layer: int,
                           variance: Sequence[float] | None = None) -> go.Figure:
    """The input's tokens in the first two principal components of their layer-``layer`` vectors."""
    coords = np.asarray(coords, dtype=float)
    if coords.ndim != 2 or coords.shape[1] != 2 or coords.shape[0] != len(tokens):
        raise ValueError(f"coords must be (tokens, 2) = ({len(tokens)}, 2), got {coords.shape}")
    if len(segments) != len(tokens):
        raise ValueError(f"tokens ({len(tokens)}) and segments ({len(segments)}) differ in length")
    if not tokens:
        return empty_figure("No tokens")
    show_text = len(tokens) <= _MAX_POINT_LABELS
    traces = []
    for seg in [s for s in ("A", "B", "special") if s in segments] + sorted(set(segments) - set(SEGMENT_COLORS)):
        idx = [i for i, s in enumerate(segments) if s == seg]
        traces.append(dict(
            type="scatter", x=coords[idx, 0], y=coords[idx, 1], mode="markers+text" if show_text else "markers",
            text=[plotly_text(tokens[i]) for i in idx], textposition="top center", name=SEGMENT_NAMES.get(seg, seg),
            marker=dict(color=SEGMENT_COLORS.get(seg, "#cbd5e1"), size=10),
            customdata=idx, hovertemplate="position %{customdata} · %{text}<extra></extra>"))
    where = "the embedding output" if layer == 0 else f"layer {layer}"
    return figure(traces, title=f"Tokens in context: 2-D PCA of their vectors at {where}", height=440,
                  margin=dict(l=50, r=20, t=50, b=40),
                  legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
                  **_pca_axes(variance))


def segment_difference_bars(difference: np.ndarray | None, norm: float | None = None,
                            cosine: float | None = None) -> go.Figure:
    """Bars of segment B - A per hidden dimension (the one learned vector that tells the segments apart)."""
    if difference is None:
        return empty_figure("This model has a single segment type")
    difference = np.asarray(difference, dtype=float).ravel()
    if difference.size == 0:
        return empty_figure("No dimensions")
    # B-leaning dimensions in B's colour, A-leaning in A's: a two-colour scale over 0/1 (a number array
    # travels as typed binary; a list of colour strings is validated one by one)
    sides = (difference >= 0).astype(np.float32)
    colors = dict(color=sides, colorscale=[[0, SEGMENT_COLORS["A"]], [1, SEGMENT_COLORS["B"]]], cmin=0, cmax=1)
    details = []
    if norm is not None:
        details.append(f"‖B − A‖ = {norm:.3f}")
    if cosine is not None:
        details.append(f"cos(A, B) = {cosine:.3f}")
    return figure([dict(type="bar", x=list(range(difference.size)), y=difference, marker=colors,
                        hovertemplate="dim %{x}<br>B − A %{y:.4f}<extra></extra>")],
                  title="Segment embedding B − A" + (f" ({', '.join(details)})" if details else ""),
                  height=300, margin=dict(l=50, r=20, t=50, b=40), xaxis=dict(title="hidden dimension"),
                  yaxis=dict(title="B − A"), bargap=0)


def neighbours_table(tokens: Sequence[str], neighbour_tokens: Sequence[Sequence[str]],
                     neighbour_ids: Sequence[Sequence[int]], scores: Sequence[Sequence[float]],
                     position: int | None = None) -> pd.DataFrame:
    """Long table ``NEIGHBOUR_COLUMNS``: every token's neighbours, or one position's only."""
    n = len(tokens)
    if not (len(neighbour_tokens) == len(neighbour_ids) == len(scores) == n):
        raise ValueError("tokens, neighbour tokens, ids and scores must have one row per token")
    if position is not None and not 0 <= position < n:
        raise ValueError(f"position {position} is not in this input (0..{n - 1})")
    rows = [[i, tokens[i], rank + 1, piece, int(token_id), round(float(score), 4)]
            for i in (range(n) if position is None else [position])
            for rank, (piece, token_id, score) in enumerate(zip(neighbour_tokens[i], neighbour_ids[i], scores[i]))]
    return pd.DataFrame(rows, columns=NEIGHBOUR_COLUMNS)


def position_similarity_grid(panels: Sequence[tuple[str, np.ndarray]], columns: int = 3) -> go.Figure:
    """Small multiples: one position-similarity heatmap per (title, P x P matrix), one shared colour scale."""
    if not panels:
        return empty_figure("No checkpoints")
    columns = max(1, min(columns, len(panels)))
    rows = math.ceil(len(panels) / columns)
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[title for title, _ in panels],
                        horizontal_spacing=0.04, vertical_spacing=0.12 if rows > 1 else 0.08)
    for index, (title, matrix) in enumerate(panels):
        matrix = np.asarray(matrix, dtype=float)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"{title}: the similarity matrix must be square, got {matrix.shape}")
        row, col = divmod(index, columns)
        fig.add_trace(go.Heatmap(z=matrix, coloraxis="coloraxis", name=title,
                                 hovertemplate=title + "<br>positions %{y} and %{x}<br>cosine %{z:.3f}<extra></extra>"),
                      row=row + 1, col=col + 1)
        fig.update_yaxes(autorange="reversed", row=row + 1, col=col + 1)
    fig.update_layout(coloraxis=dict(colorscale=SIMILARITY_SCALE, cmin=-1, cmax=1, colorbar=dict(title="cosine")),
                      height=120 + 300 * rows, margin=dict(l=40, r=20, t=60, b=30),
                      title="Position-embedding similarity over training")
    return fig


def _pca_axes(variance: Sequence[float] | None) -> dict:
    def title(i: int) -> str:
        if variance is None or len(variance) <= i:
            return f"PC{i + 1}"
        return f"PC{i + 1} ({percent(float(variance[i]))} of variance)"
    return dict(xaxis=dict(title=title(0)), yaxis=dict(title=title(1)))
