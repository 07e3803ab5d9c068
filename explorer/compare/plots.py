"""Pure figure builders for the Compare tab: how alike two models' layers are, and one head in both.

Plain arrays in (from ``engine.probes.comparison.compare``), a plotly ``Figure`` out; no tensor math here.
"""
from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from explorer.plots import COLORSCALE
from explorer.plots import axis_names, empty_figure, figure, subplot_grid, tick_labels

CKA_COLOR, INPUT_COLOR, PLAIN_COLOR, COSINE_COLOR = "#4f6bed", "#9aa9f5", "#8c8c8c", "#f28e2b"
DIFFERENCE_SCALE = "RdBu_r"            # blue: B attends less than A, red: more; white: no change


def layer_names(count: int) -> list[str]:
    """"layer 0 (embeddings)", "layer 1", … for ``count`` hidden states: the embeddings' output is layer 0 and
    layer k the output of the k-th encoder layer, as every tab numbers them (``explorer.glossary.LAYER_RULE``)."""
    return [f"layer {i}" + (" (embeddings)" if i == 0 else "") for i in range(count)]


@dataclass(frozen=True)
class Line:
    """One line of the similarity figure: its legend name (with what it runs over), one value per point, and its
    kind: "set" (debiased CKA over the sentence set), "input" (debiased CKA on this input), "plain" (the plain
    estimator on this input, hidden until its legend entry is clicked) or "cosine"."""

    name: str
    values: Sequence[float]
    kind: str


_STYLES = {"set": (dict(color=CKA_COLOR, width=3), True),
           "input": (dict(color=INPUT_COLOR, width=2, dash="dash"), True),
           "plain": (dict(color=PLAIN_COLOR, width=2, dash="dot"), "legendonly"),
           "cosine": (dict(color=COSINE_COLOR, width=2, dash="dot"), True)}


def similarity_figure(lines: Sequence[Line], label_a: str, label_b: str, names: Sequence[str] | None = None,
                      note: str | None = None) -> go.Figure:
    """Per layer, how alike model A's and model B's representations are: one trace per :class:`Line` (CKA: 1 = the
    same up to rotation and scale, about 0 = unrelated). ``names``: one x label per point when the layers are pairs
    (A's layer with B's at the same relative depth), else "layer 0 (embeddings)", "layer 1", …; ``note``: a
    subtitle (what the CKA runs over, a caution)."""
    if not lines or not len(lines[0].values):
        return empty_figure("No layers to compare")
    x_title = ("A's layer with B's at the same relative depth (layer 0 = the embeddings' output)" if names else
               "layer output (layer 0 = the embeddings' output)")
    names = list(names) if names else layer_names(len(lines[0].values))
    traces, lowest = [], 0.0
    for line in lines:
        values = [float(v) if math.isfinite(float(v)) else None for v in line.values]
        style, visible = _STYLES[line.kind]
        lowest = min([lowest] + [v for v in values if v is not None and visible is True])
        traces.append(dict(type="scatter", x=names, y=values, name=line.name, mode="lines+markers", line=style,
                           visible=visible, hovertemplate="%{x}<br>" + line.name + " %{y:.3f}<extra></extra>"))
    title = f"How alike the layers are: A ({label_a}) vs B ({label_b})"
    if note:
        title += f"<br><sup>{html.escape(note)}</sup>"
    return figure(traces, title=dict(text=title), height=360, margin=dict(l=50, r=20, t=80, b=60),
                  yaxis=dict(title=dict(text="similarity"), range=[min(-0.05, lowest - 0.05), 1.05]),
                  xaxis=dict(title=dict(text=x_title)),
                  legend=dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0), hovermode="x unified")


def cka_heatmap(cka: np.ndarray, label_a: str, label_b: str, over: str = "this input") -> go.Figure:
    """Debiased linear CKA of every layer of A (rows) against every layer of B (columns) over ``over`` ("1,052
    tokens of 80 sentences"); a value below 0 is drawn as 0, and hovering shows it."""
    rows, cols = cka.shape
    return figure([dict(type="heatmap", z=np.round(cka, 4), x=layer_names(cols), y=layer_names(rows), zmin=0.0,
                        zmax=1.0, colorscale=COLORSCALE, colorbar=dict(title="CKA", thickness=12),
                        hovertemplate="A %{y}<br>B %{x}<br>debiased linear CKA %{z:.3f}<extra></extra>")],
                  title=dict(text=f"Debiased linear CKA of every layer pair over {html.escape(over)}: "
                                  f"A ({label_a}, rows) vs B ({label_b}, columns)"),
                  height=max(320, 28 * rows + 140), margin=dict(l=140, r=20, t=60, b=90),
                  yaxis=dict(autorange="reversed"))


def attention_pair_figure(map_a: np.ndarray, map_b: np.ndarray, difference: np.ndarray, tokens: Sequence[str],
                          layer: int, head: int, label_a: str, label_b: str) -> go.Figure:
    """One head in A, in B, and B - A side by side (rows = query tokens, columns = keys); ``layer`` is the
    number shown (from 1: the heads of layer k make layer k's output)."""
    n = len(tokens)
    if n == 0:
        return empty_figure("No tokens")
    tickvals, ticktext = tick_labels(tokens)
    titles = [f"A: {label_a}", f"B: {label_b}", "B − A"]
    layout = subplot_grid(1, 3, titles, horizontal_spacing=0.06)
    traces = []
    limit = max(0.01, float(np.abs(difference).max()))    # two equal heads: a bar of ±0.01, not 5e-7
    for index, (values, diverging) in enumerate(((map_a, False), (map_b, False), (difference, True))):
        x, y = axis_names(index)
        trace = dict(type="heatmap", z=np.round(values, 4), xaxis=x, yaxis=y, showscale=diverging or index == 0,
                     hovertemplate="query %{y}<br>key %{x}<br>%{z:.3f}<extra></extra>")
        if diverging:
            trace.update(colorscale=DIFFERENCE_SCALE, zmid=0.0, zmin=-limit, zmax=limit,   # never "1μ" on the bar
                         colorbar=dict(title="B − A", thickness=12, x=1.02, exponentformat="none",
                                       tickformat=".3~f"))
        else:
            trace.update(colorscale=COLORSCALE, zmin=0.0, zmax=1.0,
                         colorbar=dict(title="weight", thickness=12, x=-0.12))
        traces.append(trace)
        axis = dict(tickmode="array", tickvals=tickvals, ticktext=ticktext, showgrid=False, zeroline=False)
        layout[f"xaxis{index + 1 if index else ''}"] = {**layout.get(f"xaxis{index + 1 if index else ''}", {}),
                                                        **axis, "tickangle": -60 if n > 8 else 0}
        layout[f"yaxis{index + 1 if index else ''}"] = {**layout.get(f"yaxis{index + 1 if index else ''}", {}),
                                                        **axis, "autorange": "reversed"}
    return figure(traces, title=dict(text=f"Layer {layer}, head {head} in both models and their difference"),
                  height=max(360, min(620, 18 * n + 200)), margin=dict(l=70, r=70, t=90, b=80), **layout)
