"""Pure figure builders for the Compare tab: how alike two models' layers are, and one head in both.

Plain arrays in (from ``engine.probes.comparison.compare``), a plotly ``Figure`` out; no tensor math here.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots import COLORSCALE
from explorer.plots import axis_names, empty_figure, figure, subplot_grid, tick_labels

CKA_COLOR, COSINE_COLOR = "#4f6bed", "#f28e2b"
DIFFERENCE_SCALE = "RdBu_r"            # blue: B attends less than A, red: more; white: no change


def layer_names(count: int) -> list[str]:
    """"layer 0 (embeddings)", "layer 1", … for ``count`` hidden states: the embeddings' output is layer 0 and
    layer k the output of the k-th encoder layer, as every tab numbers them (``explorer.glossary.LAYER_RULE``)."""
    return [f"layer {i}" + (" (embeddings)" if i == 0 else "") for i in range(count)]


def similarity_figure(cka: Sequence[float], cosine: Sequence[float] | None, label_a: str, label_b: str,
                      names: Sequence[str] | None = None, unit: str = "token") -> go.Figure:
    """Per layer, linear CKA (and the mean ``unit`` cosine when given: "token", or "word" when the models were
    aligned by words) of model A's and model B's representation of the input: 1 = the same up to rotation and
    scale. ``names``: one x label per point when the layers are pairs (A's layer with B's at the same relative
    depth), else "layer 0 (embeddings)", "layer 1", …"""
    if not len(cka):
        return empty_figure("No layers to compare")
    x_title = ("A's layer with B's at the same relative depth (layer 0 = the embeddings' output)" if names else
               "layer output (layer 0 = the embeddings' output)")
    names = list(names) if names else layer_names(len(cka))
    traces = [dict(type="scatter", x=names, y=[float(v) for v in cka], name="linear CKA", mode="lines+markers",
                   line=dict(color=CKA_COLOR, width=2),
                   hovertemplate="%{x}<br>linear CKA %{y:.3f}<extra></extra>")]
    if cosine is not None:
        traces.append(dict(type="scatter", x=names, y=[float(v) for v in cosine], name=f"mean {unit} cosine",
                           mode="lines+markers", line=dict(color=COSINE_COLOR, width=2, dash="dot"),
                           hovertemplate="%{x}<br>mean cosine %{y:.3f}<extra></extra>"))
    return figure(traces, title=dict(text=f"How alike the layers are: A ({label_a}) vs B ({label_b})"), height=320,
                  margin=dict(l=50, r=20, t=60, b=60), yaxis=dict(title=dict(text="similarity"), range=[-0.05, 1.05]),
                  xaxis=dict(title=dict(text=x_title)),
                  legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1), hovermode="x unified")


def cka_heatmap(cka: np.ndarray, label_a: str, label_b: str) -> go.Figure:
    """Linear CKA of every layer of A (rows) against every layer of B (columns)."""
    rows, cols = cka.shape
    return figure([dict(type="heatmap", z=np.round(cka, 4), x=layer_names(cols), y=layer_names(rows), zmin=0.0,
                        zmax=1.0, colorscale=COLORSCALE, colorbar=dict(title="CKA", thickness=12),
                        hovertemplate="A %{y}<br>B %{x}<br>linear CKA %{z:.3f}<extra></extra>")],
                  title=dict(text=f"Linear CKA of every layer pair: A ({label_a}, rows) vs B ({label_b}, columns)"),
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
