"""Pure figure builders for the Syntax tab: heads against dependencies, the layer probe, both over training.

Plain arrays in (from ``engine.probes.syntax``), a plotly ``Figure`` out; accuracies are shares in [0, 1] shown
as percentages. Attention layers are numbered from 1 and heads from 0, probe layers from 0 (the embeddings'
output): ``explorer.glossary.LAYER_RULE``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots import category_colors, empty_figure, figure, subplot_grid

SCALE = "Viridis"
ACCURACY_COLOR, CONTROL_COLOR, SELECTIVITY_COLOR, MAJORITY_COLOR = "#4f6bed", "#f28e2b", "#2ca02c", "#888888"
PERCENT_AXIS = dict(tickformat=".0%", range=[-0.02, 1.02])
# Readable at a phone's 390 px: a grid is as wide as its cells need (never squeezed), and a figure wider than its
# box scrolls sideways inside it (assets/style.css, "Readable at 390 px"); lines and legends wrap.
CELL_PX, ROW_PX = 36, 30             # a relation grid's cell: "100%" in 10 px type, with room to spare
OVERVIEW_CELL_PX, OVERVIEW_ROW_PX = 14, 20   # an overview column: its upright 9 px tick label ("12-11") is ~11 px
COLORBAR_PX = 90                     # the right margin: the colour bar, its percentages and its upright title
MIN_WIDTH = 400                      # a grid's two-line title fits at the desktop's title size
LEGEND_BELOW = dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom")
ACCURACY_BAR = dict(title=dict(text="accuracy", side="right"), tickformat=".0%", thickness=12)


def grid_width(columns: int, cell: int, left: int) -> int:
    """The width in px of a heatmap figure whose ``columns`` get ``cell`` px each beside a ``left`` margin and the
    colour bar (at least ``MIN_WIDTH``)."""
    return max(MIN_WIDTH, left + columns * cell + COLORBAR_PX)


def head_names(num_layers: int, num_heads: int) -> list[str]:
    """"1-0", "1-1", … "L-(nh-1)": every head as layer-head, layers from 1 and heads from 0, layer by layer."""
    return [f"{layer}-{head}" for layer in range(1, num_layers + 1) for head in range(num_heads)]


def relations_overview(accuracy: np.ndarray, relations: Sequence[str], counts: Sequence[int],
                       baseline: Sequence[float], direction: str) -> go.Figure:
    """One row per relation, one column per head (``accuracy`` is (R, L, nh)): how often the head's most
    attended word is the right one. Rows are named by their relation; the hover adds its arcs and the
    fixed-offset baseline to beat. ``OVERVIEW_CELL_PX`` per head: wider than a phone, it scrolls."""
    if not len(relations):
        return empty_figure("No relation has enough arcs")
    rows, layers, heads = accuracy.shape
    flat = accuracy.reshape(rows, layers * heads)                                    # (R, L * nh)
    margin = flat - np.asarray(baseline, dtype=float)[:, None]
    custom = [[[m, int(c), float(b)] for m in row] for row, c, b in zip(margin.tolist(), counts, baseline)]
    trace = dict(type="heatmap", z=flat.tolist(), x=head_names(layers, heads), y=list(relations), zmin=0, zmax=1,
                 colorscale=SCALE, customdata=custom, colorbar=ACCURACY_BAR,
                 hovertemplate="%{y} (%{customdata[1]} arcs, baseline %{customdata[2]:.0%})<br>head %{x}<br>"
                               "accuracy %{z:.1%}<br>minus baseline %{customdata[0]:+.1%}<extra></extra>")
    left = 100
    return figure([trace], title=dict(text=f"Every head against every relation<br>({direction})", font=dict(size=14)),
                  width=grid_width(layers * heads, OVERVIEW_CELL_PX, left), height=OVERVIEW_ROW_PX * rows + 190,
                  margin=dict(l=left, r=COLORBAR_PX, t=70, b=110),
                  xaxis=dict(title=dict(text="head (layer-head: layers from 1, heads from 0)"), type="category",
                             tickangle=-90, tickfont=dict(size=9)),
                  yaxis=dict(autorange="reversed", type="category"))


def relation_heatmap(accuracy: np.ndarray, relation: str, baseline: float, offset: int,
                     direction: str) -> go.Figure:
    """One relation's (L, nh) grid of head accuracies, layers from 1 down the side, heads from 0 across, each cell's
    percentage printed (``CELL_PX`` wide: wider than a phone, it scrolls); the hover says whether each head beats
    the fixed-offset baseline."""
    if accuracy.size == 0:
        return empty_figure("No heads")
    layers, heads = accuracy.shape
    beats = np.where(accuracy > baseline, "beats the baseline", "does not beat the baseline")
    trace = dict(type="heatmap", z=accuracy.tolist(), x=[str(h) for h in range(heads)],
                 y=[str(layer) for layer in range(1, layers + 1)], zmin=0, zmax=1, colorscale=SCALE,
                 customdata=beats.tolist(), colorbar=ACCURACY_BAR, textfont=dict(size=10),
                 text=[[f"{v:.0%}" for v in row] for row in accuracy], texttemplate="%{text}",
                 hovertemplate="layer %{y}, head %{x}<br>accuracy %{z:.1%}<br>%{customdata}<extra></extra>")
    title = (f"{relation} ({direction}): each head's accuracy<br>the best fixed offset ({offset:+d} words) "
             f"gets {baseline:.0%}")
    left = 64
    return figure([trace], title=dict(text=title, font=dict(size=14)), width=grid_width(heads, CELL_PX, left),
                  height=ROW_PX * layers + 150, margin=dict(l=left, r=COLORBAR_PX, t=70, b=60),
                  xaxis=dict(title=dict(text="head (from 0)"), type="category"),
                  yaxis=dict(title=dict(text="layer (from 1)"), type="category", autorange="reversed"))


def probe_figure(layers: Sequence[int], accuracy: Sequence[float], control: Sequence[float],
                 majority: float) -> go.Figure:
    """The UPOS probe by layer: accuracy, control-task accuracy, selectivity (their difference) and the
    majority (lookup-table) baseline as a dotted line."""
    if not len(layers):
        return empty_figure("No layers")
    acc, ctl = np.asarray(accuracy, dtype=float), np.asarray(control, dtype=float)
    x = [int(v) for v in layers]
    traces = [
        dict(type="scatter", x=x, y=acc.tolist(), name="UPOS accuracy", mode="lines+markers",
             line=dict(color=ACCURACY_COLOR, width=2), hovertemplate="layer %{x}<br>accuracy %{y:.1%}<extra></extra>"),
        dict(type="scatter", x=x, y=ctl.tolist(), name="control task accuracy", mode="lines+markers",
             line=dict(color=CONTROL_COLOR, width=2, dash="dot"),
             hovertemplate="layer %{x}<br>control accuracy %{y:.1%}<extra></extra>"),
        dict(type="bar", x=x, y=(acc - ctl).tolist(), name="selectivity (accuracy − control)", opacity=0.45,
             marker=dict(color=SELECTIVITY_COLOR), hovertemplate="layer %{x}<br>selectivity %{y:+.1%}<extra></extra>"),
        dict(type="scatter", x=[x[0], x[-1]], y=[majority, majority], name="each word's most frequent tag",
             mode="lines", line=dict(color=MAJORITY_COLOR, dash="dash"), hoverinfo="skip"),
    ]
    return figure(traces, title=dict(text="Part of speech (UPOS) read from each layer<br>by a linear probe",
                                     font=dict(size=14)),
                  height=420, margin=dict(l=60, r=20, t=70, b=130), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="layer (0 = the embeddings' output)"), dtick=1),
                  yaxis=dict(title=dict(text="held-out words"), tickformat=".0%", range=[-0.1, 1.02]))


def over_training_figure(steps: Sequence[int | None], labels: Sequence[str], relations: Sequence[str],
                         best_accuracy: np.ndarray, baseline: Sequence[float], selectivity: np.ndarray) -> go.Figure:
    """Two panels over steps, one above the other: the best head's accuracy for each of ``relations`` (solid,
    named by its relation) beside its baseline (dotted, the same colour), and the probe's selectivity at each
    layer (named "layer i"); the legend wraps below. ``best_accuracy`` is (C, R), ``selectivity`` (C, L + 1)."""
    if not len(labels):
        return empty_figure("No checkpoints")
    x = [s if s is not None else label for s, label in zip(steps, labels)]
    colors = category_colors(list(relations))
    traces = []
    for r, relation in enumerate(relations):
        traces.append(dict(type="scatter", x=x, y=best_accuracy[:, r].tolist(), name=relation,
                           mode="lines+markers", line=dict(color=colors[relation], width=2), legendgroup=relation,
                           xaxis="x", yaxis="y", hovertemplate=f"{relation}<br>step %{{x}}<br>best head "
                                                              "%{y:.1%}<extra></extra>"))
        traces.append(dict(type="scatter", x=[x[0], x[-1]], y=[baseline[r]] * 2, name=f"{relation}: baseline",
                           mode="lines", line=dict(color=colors[relation], dash="dot"), legendgroup=relation,
                           showlegend=False, xaxis="x", yaxis="y", hoverinfo="skip"))
    layer_colors = category_colors([f"layer {i}" for i in range(selectivity.shape[1])])
    for layer in range(selectivity.shape[1]):
        name = f"layer {layer}"
        traces.append(dict(type="scatter", x=x, y=selectivity[:, layer].tolist(), name=name,
                           mode="lines+markers", line=dict(color=layer_colors[name]), xaxis="x2", yaxis="y2",
                           hovertemplate=f"{name}<br>step %{{x}}<br>selectivity %{{y:+.1%}}<extra></extra>"))
    layout = subplot_grid(2, 1, ["Best head per relation (dotted: its baseline)", "UPOS probe selectivity by layer"],
                          vertical_spacing=0.22, x=dict(title=dict(text="step")), x2=dict(title=dict(text="step")),
                          y=dict(title=dict(text="accuracy"), **PERCENT_AXIS),
                          y2=dict(title=dict(text="selectivity"), tickformat=".0%"))
    for title in layout["annotations"]:              # a panel's title fits a phone's width, above its top tick label
        title.update(font=dict(size=13), yshift=8)
    return figure(traces, height=680, margin=dict(l=60, r=20, t=40, b=130), legend=LEGEND_BELOW, **layout)
