"""Pure figure builders for the Why tab: plain data (tokens, one attribution each) in, plotly out.

No Gradio and no tensor math. Tokens are placed **by position** (a bar per position, the token text
as its tick label), so two ``the``s stay two bars. Red pushes the explained score up, blue pushes it
down (the same colours as the coloured tokens, ``explorer.why.token_html``).
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from explorer.formatting import signed_percent
from explorer.plots import empty_figure, figure, percent_tickformat, plotly_text
from explorer.why.numbers import decimal

UP = "#dc2626"        # red: the token pushed the score up
DOWN = "#2563eb"      # blue: the token pushed it down
TOP_K = 15


def top_order(values: Sequence[float], k: int = TOP_K) -> list[int]:
    """Positions of the ``k`` largest attributions by size, largest first (equal sizes: the earlier first);
    tokens with exactly 0 (those kept in the baseline) are left out."""
    return sorted((i for i in range(len(values)) if values[i] != 0), key=lambda i: (-abs(values[i]), i))[:max(0, k)]


def top_tokens_figure(tokens: Sequence[str], values: Sequence[float], k: int = TOP_K, title: str | None = None,
                      x_title: str = "attribution", percent_points: bool = False) -> go.Figure:
    """Horizontal bars of the ``k`` tokens with the largest attributions by size, the largest on top:
    red for a push up, blue for a push down; labels ``position: token``, values to 3 significant digits
    (plain decimals: ``explorer.why.numbers.decimal``).
    ``percent_points``: the attributions are shares of a probability, so values and ticks read as signed
    percentages ("+3.12%"). Never an SI prefix ("20μ") or an exponent on the axis."""
    if len(tokens) != len(values):
        raise ValueError(f"{len(tokens)} tokens but {len(values)} attributions")
    if not tokens:
        return empty_figure("No tokens to explain")
    order = top_order(values, k)
    if not order:
        return empty_figure("Every token's attribution is 0")
    rows = list(range(len(order)))
    labels = [f"{i}: {plotly_text(tokens[i])}" for i in order]
    shown = [float(values[i]) for i in order]
    show = signed_percent if percent_points else decimal
    ticks = {"tickformat": percent_tickformat(max(abs(v) for v in shown))} if percent_points else {}
    bars = dict(type="bar", x=shown, y=rows, orientation="h", showlegend=False,
                marker=dict(color=[UP if v > 0 else DOWN for v in shown], line=dict(width=0)),
                text=[show(v) for v in shown], textposition="auto", textfont=dict(size=12),
                customdata=[[label, show(v), "up" if v > 0 else "down"] for label, v in zip(labels, shown)],
                hovertemplate="%{customdata[0]}<br>%{customdata[1]} (pushes %{customdata[2]})<extra></extra>")
    return figure([bars], title=dict(text=title) if title else None, height=max(220, 90 + 28 * len(rows)),
                  margin=dict(l=20, r=20, t=(70 if "<br>" in title else 50) if title else 20, b=40), bargap=0.25,
                  xaxis=dict(title=dict(text=f"{x_title} (percentage points)" if percent_points else x_title),
                             zeroline=True, exponentformat="none", **ticks),
                  yaxis=dict(tickmode="array", tickvals=rows, ticktext=labels, autorange="reversed"))
