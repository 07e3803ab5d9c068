"""Pure figure builders for the Heads tab: probabilities as bars, and where [CLS] looks.

Plain data in, a plotly ``Figure`` out; no Gradio, no tensor math. Bars are plotted **by
position** (y = 0, 1, 2, ...) with the label text as tick labels, so two labels or choices with
the same text stay separate bars; tokens likewise (x = 0..S-1).
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from explorer.plots import COLORSCALE
from explorer.formatting import percent
from explorer.plots import SEGMENT_COLORS, empty_figure, figure, percent_tickformat, plotly_text, tick_labels

BAR_COLOR = "#4f6bed"
BEST_COLOR = "#f28e2b"
MAX_LABEL_CHARS = 60        # a longer label (a long choice) is cut with "…" on its tick; hover keeps it whole


def short(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with "…"."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def probability_bars(labels: Sequence[str], scores: Sequence[float], title: str | None = None,
                     best: int | None = None, x_title: str = "probability") -> go.Figure:
    """One horizontal bar per label, in the order given (first on top), ``best`` highlighted
    (default: the highest score); the bars' text and hover are percentages."""
    if len(labels) != len(scores):
        raise ValueError(f"{len(labels)} labels but {len(scores)} scores")
    if not labels:
        return empty_figure("No probabilities yet")
    rows = list(range(len(labels)))
    best = max(rows, key=lambda r: scores[r]) if best is None else best
    custom = [[plotly_text(label), percent(score)] for label, score in zip(labels, scores)]
    bars = dict(type="bar", x=list(scores), y=rows, orientation="h", showlegend=False,
                marker=dict(color=[BEST_COLOR if r == best else BAR_COLOR for r in rows]),
                text=[percent(s) for s in scores], textposition="auto", textfont=dict(size=12),
                customdata=custom, hovertemplate="%{customdata[0]}<br>p = %{customdata[1]}<extra></extra>")
    return figure([bars], title=dict(text=title) if title else None, height=max(200, 90 + 38 * len(rows)),
                  margin=dict(l=20, r=20, t=50 if title else 20, b=40), bargap=0.25,
                  xaxis=dict(title=dict(text=x_title), range=[0, 1], tickformat=".0%"),
                  yaxis=dict(tickmode="array", tickvals=rows, ticktext=[plotly_text(short(label)) for label in labels],
                             autorange="reversed"))


def cls_attention_figure(tokens: Sequence[str], token_type_ids: Sequence[int],
                         weights: Sequence[Sequence[float]], title: str | None = None) -> go.Figure:
    """Where [CLS] looks: a heatmap with one row per layer (the last on top) and one column per token;
    cell (l, i) is layer l's attention from [CLS] to token i, averaged over the heads. Segment B's
    tokens are marked by an orange bar under the plot, as elsewhere in the app. The weights (each layer's row
    of [CLS]'s attention sums to 1) read as percentages, on the colour bar as in the hover."""
    if any(len(row) != len(tokens) for row in weights):
        raise ValueError(f"each layer needs one weight per token ({len(tokens)})")
    if len(token_type_ids) != len(tokens):
        raise ValueError(f"{len(token_type_ids)} type ids for {len(tokens)} tokens")
    if not tokens or len(weights) == 0:
        return empty_figure("No attention to show")
    layers = len(weights)
    positions = list(range(len(tokens)))
    shown = [plotly_text(token) for token in tokens]
    custom = [[[token, l + 1] for token in shown] for l in range(layers)]
    top = float(max(max(row) for row in weights)) or 1.0
    heat = dict(type="heatmap", z=[list(row) for row in weights], x=positions, y=list(range(1, layers + 1)),
                zmin=0.0, zmax=top, colorscale=COLORSCALE, customdata=custom,
                colorbar=dict(title=dict(text="weight"), thickness=12, tickformat=percent_tickformat(top)),
                hovertemplate="layer %{customdata[1]} · position %{x}: %{customdata[0]}"
                              "<br>attention from [CLS] = %{z:.3p}<extra></extra>")
    segment_b = [i for i, t in enumerate(token_type_ids) if t == 1]
    shapes = [dict(type="rect", xref="x", yref="paper", x0=i - 0.5, x1=i + 0.5, y0=-0.02, y1=0.0, line=dict(width=0),
                   fillcolor=SEGMENT_COLORS["B"]) for i in segment_b]
    tickvals, ticktext = tick_labels(list(tokens))
    return figure([heat], title=dict(text=title) if title else None, height=max(220, 110 + 28 * layers),
                  margin=dict(l=20, r=20, t=50 if title else 20, b=40), shapes=shapes,
                  xaxis=dict(tickmode="array", tickvals=tickvals, ticktext=ticktext, tickangle=-45, showgrid=False),
                  yaxis=dict(title=dict(text="layer"), tickmode="array", tickvals=list(range(1, layers + 1)),
                             showgrid=False))
