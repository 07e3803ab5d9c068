"""Pure figure builders for the Attention tab: plain data (numpy maps, token lists) in, plotly out.

No Gradio and no tensor math. Tokens are placed **by position** with their text as tick
labels, so repeated tokens stay separate rows and columns. Attention maps are (S, S)
arrays whose row ``i`` says where query token ``i`` looks (each row sums to 1); colours
run over the fixed range [0, 1] so heads and checkpoints compare at a glance.
Ablation and over-training figures live in ``explorer.attention.ablation_plots``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from explorer.layer_numbers import shown_layer, shown_layers
from explorer.formatting import percent
from explorer.plots import COLORSCALE, empty_figure, figure, plotly_text, tick_labels

# One colour per head in the head view: d3's category10 (bertviz's palette), then Dark24 colours that
# read on white and on a dark page alike (cycled beyond 16 heads).
HEAD_COLORS: list[str] = list(qualitative.D3) + [qualitative.Dark24[i] for i in (9, 10, 6, 23, 15, 17)]
MODEL_VIEW_MAX_TOKENS = 48     # longer inputs are pooled into blocks in the model view
HEAD_VIEW_THRESHOLD = 0.02     # weaker links are not drawn in the head view
HEAD_VIEW_LEVELS = 5           # opacity (and width) steps (one shape per head and step)
HEAD_VIEW_FADE = 0.3           # the other heads' opacity, relative to the chosen head's, when one is chosen
HEAD_VIEW_WIDTH = {True: (1.5, 0.9), False: (0.6, 0.3)}   # chosen head or not: (width at level 0, per level)
HEAD_VIEW_TOP_MARGIN = 180     # room above the plot for the legend (head toggles) under the plot's label
HEAD_VIEW_LABEL_ROOM = 0.55    # x room for the token labels on each side (the links span x = 0..1)
HOVER_TOP_LINKS = 3            # a token's hover lists its this many strongest links per head
HOVER_LABEL_TOKENS = 64        # up to this many tokens the heatmap's hover names both tokens
# The statistic per head: a cell holds "12.3" in 10 px type; margins for the layer axis and the colour bar. The
# figure is as wide as its cells need (beside its table on a desktop); wider than its box (a phone), it scrolls.
STATS_CELL_PX, STATS_LEFT_PX, STATS_RIGHT_PX, STATS_MIN_WIDTH = 32, 50, 60, 320   # 12 heads: 494 px


def compact(values: np.ndarray) -> np.ndarray:
    """float32 copy: plotly sends arrays as typed binary, so this halves the page size."""
    return np.asarray(values, dtype=np.float32)


def _check_map(attn: np.ndarray, tokens: Sequence[str]) -> np.ndarray:
    attn = np.asarray(attn)
    if attn.ndim != 2 or attn.shape[0] != attn.shape[1]:
        raise ValueError(f"an attention map must be square (S, S), got shape {attn.shape}")
    if attn.shape[0] != len(tokens):
        raise ValueError(f"the map covers {attn.shape[0]} tokens but {len(tokens)} tokens were given")
    return attn


def _axis(tokens: Sequence[str], title: str, reverse: bool = False) -> dict:
    tickvals, ticktext = tick_labels(tokens)
    axis = dict(title=title, tickmode="array", tickvals=tickvals, ticktext=ticktext, showgrid=False,
                zeroline=False, range=[-0.5, len(tokens) - 0.5])
    if reverse:
        axis["range"] = [len(tokens) - 0.5, -0.5]   # query 0 at the top
    return axis


def attention_heatmap(attn: np.ndarray, tokens: Sequence[str], layer: int, head: int,
                      title: str | None = None) -> go.Figure:
    """One head's (S, S) map: rows = query tokens (top to bottom), columns = key tokens. ``layer`` is the
    number the title shows (from 1, ``explorer.layer_numbers``)."""
    attn = _check_map(attn, tokens)
    n = len(tokens)
    if n == 0:
        return empty_figure("No tokens")
    if n <= HOVER_LABEL_TOKENS:
        labels = np.array([f"{i}: {plotly_text(t)}" for i, t in enumerate(tokens)], dtype=object)
        custom = np.empty((n, n, 2), dtype=object)                   # (S, S, 2): query label, key label
        custom[:, :, 0], custom[:, :, 1] = labels[:, None], labels[None, :]
        hover = "query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.3f}<extra></extra>"
    else:                                                            # S x S strings would weigh megabytes
        custom, hover = None, "query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"
    size = min(760, max(360, 26 * n + 160))
    return go.Figure(data=[dict(         # one construction from plain dicts: half the cost of update_layout calls
        type="heatmap", z=compact(attn), x=list(range(n)), y=list(range(n)), zmin=0.0, zmax=1.0,
        colorscale=COLORSCALE, customdata=custom, colorbar=dict(title="weight", thickness=12), hovertemplate=hover,
    )], layout=dict(
        title=dict(text=title or f"Layer {layer}, head {head}: row = query, column = key it looks at",
                   x=0.5, xanchor="center"),
        height=size, margin=dict(l=20, r=20, t=110, b=20), plot_bgcolor="rgba(0,0,0,0)",
        xaxis=_axis(tokens, "") | dict(side="top", tickangle=-60 if n > 8 else 0),
        yaxis=_axis(tokens, "query (attending)", reverse=True) | dict(scaleanchor="x", constrain="domain"),
    ))


def _link_paths(weights: np.ndarray, threshold: float) -> dict[int, str]:
    """Opacity level -> one SVG path of the segments query i (x=0) -> key j (x=1) in that level.

    Level k (1..HEAD_VIEW_LEVELS) holds the links with weight in ((k-1)/L, k/L]. A path shape costs
    Plotly a fifth of a scatter trace to validate, and a head's levels stay a handful of shapes.
    """
    rows, cols = np.nonzero(weights >= threshold)
    levels = np.clip(np.ceil(weights[rows, cols] * HEAD_VIEW_LEVELS), 1, HEAD_VIEW_LEVELS).astype(int)
    paths: dict[int, list[str]] = {}
    for i, j, level in zip(rows.tolist(), cols.tolist(), levels.tolist()):
        paths.setdefault(level, []).append(f"M0,{i}L1,{j}")
    return {level: "".join(parts) for level, parts in paths.items()}


def level_opacity(level: int) -> float:
    """The opacity of a head-view opacity level: the middle of its weight bucket (alpha = weight, as bertviz)."""
    return (level - 0.5) / HEAD_VIEW_LEVELS


def _token_hovers(layer_attn: np.ndarray, tokens: Sequence[str], heads: Sequence[int], outgoing: bool) -> list[str]:
    """Per token, its strongest links in every drawn head: where a query looks (outgoing) or who looks at a key."""
    k = min(HOVER_TOP_LINKS, len(tokens))
    chosen = layer_attn[list(heads)]                                   # (h, S, S)
    if not outgoing:
        chosen = chosen.transpose(0, 2, 1)                             # (h, key, query)
    top = np.argsort(-chosen, axis=-1, kind="stable")[..., :k]         # (h, S, k)
    side, other = ("query", "looks at") if outgoing else ("key", "looked at by")
    texts, shown = [], [plotly_text(token) for token in tokens]
    for i, token in enumerate(shown):
        lines = [f"{side} {i}: {token}, {other}"]
        for row, head in enumerate(heads):
            links = ", ".join(f"{shown[j]} {percent(chosen[row, i, j])}" for j in top[row, i].tolist()
                              if chosen[row, i, j] >= HEAD_VIEW_THRESHOLD) or "–"
            lines.append(f"head {head}: {links}")
        texts.append("<br>".join(lines))
    return texts


def link_style(level: int, chosen: bool | None) -> tuple[float, float]:
    """(opacity, width) of a head-view link at ``level``: a stronger link is both more opaque and thicker.
    ``chosen``: True for the chosen head (full opacity, thick), False for the others beside it (faded and
    thin), None when no head is chosen (full opacity, the chosen head's widths)."""
    base, step = HEAD_VIEW_WIDTH[chosen is not False]
    opacity = level_opacity(level) * (HEAD_VIEW_FADE if chosen is False else 1.0)
    return opacity, base + step * level


def head_color(head: int) -> str:
    """The head view's colour of ``head`` (cycled through ``HEAD_COLORS``)."""
    return HEAD_COLORS[head % len(HEAD_COLORS)]


def head_view(layer_attn: np.ndarray, tokens: Sequence[str], heads: Sequence[int], layer: int,
              threshold: float = HEAD_VIEW_THRESHOLD, focus: int | None = None) -> go.Figure:
    """BertViz-style: query tokens left, key tokens right, a line per link, more opaque and thicker the more
    attention it carries.

    ``layer_attn`` is (nh, S, S) and ``layer`` the number the title shows (from 1); one colour per head in
    ``heads``, and one legend entry per head above the plot (click: hide or show the head; double-click: that
    head alone). ``focus``, the chosen head, when drawn, stands out: its links are drawn on top at full
    opacity and thick, the other heads' faded and thin (:func:`link_style`). Each head's links are drawn in
    ``HEAD_VIEW_LEVELS`` shapes, one per level; links under ``threshold`` are not drawn. Hovering a token
    lists its strongest links in every drawn head.
    """
    layer_attn = np.asarray(layer_attn, dtype=np.float32)     # one layer, (nh, S, S): never a float64 copy
    if layer_attn.ndim != 3:
        raise ValueError(f"layer attention must be (heads, S, S), got shape {layer_attn.shape}")
    _check_map(layer_attn[0] if len(layer_attn) else np.zeros((len(tokens),) * 2), tokens)
    n = len(tokens)
    if n == 0:
        return empty_figure("No tokens")
    bad = [h for h in heads if not 0 <= h < layer_attn.shape[0]]
    if bad:
        raise ValueError(f"heads {bad} do not exist: this layer has heads 0 to {layer_attn.shape[0] - 1}")
    if not heads:
        return empty_figure("Choose at least one head to draw")
    focus = focus if focus in heads else None
    shapes: list[dict] = []
    for head in sorted(heads, key=lambda h: h == focus):               # the chosen head last: drawn on top
        color, name = head_color(head), f"head {head}" + (" (chosen)" if head == focus else "")
        shapes.append(dict(type="line", x0=0, x1=0, y0=0, y1=0, line=dict(color=color, width=4), name=name,
                           legendgroup=name, showlegend=True))         # the legend entry, at full colour
        chosen = None if focus is None else head == focus
        for level, path in sorted(_link_paths(layer_attn[head], threshold).items()):
            opacity, width = link_style(level, chosen)
            shapes.append(dict(type="path", path=path, xref="x", yref="y", line=dict(color=color, width=width),
                               opacity=opacity, name=name, legendgroup=name, layer="below"))
    stand_out = f"<br>Head {focus}, the chosen head, is drawn strongest; the others are faded." if focus is not None else ""
    traces: list[dict] = []
    positions = np.arange(n, dtype=np.float32)
    for x, side, outgoing in ((0, "middle left", True), (1, "middle right", False)):
        traces.append(dict(type="scatter", x=np.full(n, x, dtype=np.float32), y=positions, mode="markers+text",
                           text=[plotly_text(t) for t in tokens], textposition=side, showlegend=False, cliponaxis=False,
                           marker=dict(size=9, color="#6b7280"), hovertext=_token_hovers(layer_attn, tokens, heads, outgoing),
                           hovertemplate="%{hovertext}<extra></extra>", hoverlabel=dict(align="left")))
    headers = [dict(text=text, x=x, y=-1.1, xref="x", yref="y", xanchor=anchor, showarrow=False, font=dict(size=13))
               for x, anchor, text in ((0, "right", "<b>query</b> (looks)"), (1, "left", "<b>key</b> (looked at)"))]
    return figure(
        traces, height=min(1400, max(340, 22 * n + 190)), margin=dict(l=10, r=10, t=HEAD_VIEW_TOP_MARGIN, b=10),
        plot_bgcolor="rgba(0,0,0,0)", annotations=headers, shapes=shapes, hovermode="closest",
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom", itemwidth=30, tracegroupgap=0,
                    title=dict(text=f"Layer {layer}: a thicker, more opaque line is more attention.{stand_out}<br>"
                                    "Click a head to hide or show it, double-click to see it alone.<br>Hover a token "
                                    "for its strongest links.", side="top")),
        xaxis=dict(visible=False, range=[-HEAD_VIEW_LABEL_ROOM, 1 + HEAD_VIEW_LABEL_ROOM], fixedrange=True),
        yaxis=dict(visible=False, range=[n - 0.5, -1.6]),
    )


def pool_map(attn: np.ndarray, block: int) -> np.ndarray:
    """(..., S, S) -> (..., ceil(S/b), ceil(S/b)): mean over query blocks, sum over key blocks (rows still sum
    to 1). float16/float32 maps stay float32 (never a float64 or padded copy of the whole: the keys are summed
    first, which shrinks the array by ``block`` before anything else is made)."""
    attn = np.asarray(attn)
    if block <= 1:
        return attn
    dtype = np.result_type(attn.dtype, np.float32)
    seq_len = attn.shape[-1]
    starts = np.arange(0, seq_len, block)
    maps = attn.reshape(-1, seq_len, seq_len)                                    # (M, S, S), a view
    sums = np.empty((maps.shape[0], len(starts), len(starts)), dtype=dtype)      # (M, Q, K)
    for index, one in enumerate(maps):                                           # one map at a time
        keys = np.add.reduceat(one.astype(dtype, copy=False), starts, axis=-1)   # (S, K)
        sums[index] = np.add.reduceat(keys, starts, axis=-2)                     # (Q, K)
    counts = np.minimum(block, seq_len - starts).astype(dtype)                   # real queries per block (Q,)
    return (sums / counts[:, None]).reshape(*attn.shape[:-2], len(starts), len(starts))   # (..., Q, K)


def tile_maps(maps: np.ndarray) -> np.ndarray:
    """(L, nh, S, S) -> one (L*(S+1)-1, nh*(S+1)-1) picture: layer rows, head columns, a NaN gap between maps."""
    layers, heads, n = maps.shape[0], maps.shape[1], maps.shape[2]
    padded = np.pad(np.asarray(maps, dtype=np.float32), [(0, 0), (0, 0), (0, 1), (0, 1)],
                    constant_values=np.nan)                                      # (L, nh, S+1, S+1)
    tiled = padded.transpose(0, 2, 1, 3).reshape(layers * (n + 1), heads * (n + 1))   # (L*(S+1), nh*(S+1))
    return tiled[:-1, :-1]


def _grid_labels(count: int, n: int, outer: str, inner: str, first: int = 0) -> list[str]:
    """Category labels of a tiled axis: "L2 query 5" per cell (the outer number counted from ``first``), a
    distinct blank per gap (hover skips gaps)."""
    step = n + 1
    return [f"{outer}{i // step + first} {inner} {i % step}" if i % step < n else " " * (i // step + 1)
            for i in range(count * step - 1)]


def model_view(attentions: np.ndarray, tokens: Sequence[str], focus: tuple[int, int] | None = None) -> go.Figure:
    """Every head of every layer as a small heatmap (rows = layers, columns = heads).

    Drawn as one heatmap of the tiled maps (a figure of 72 subplots costs ten times more to build and
    to send). Rows are labelled L1 to L(L): row ``i`` of ``attentions`` is layer i + 1, as the tab numbers
    layers. ``focus`` (row index, head) gets a red frame: it is the head shown large in the heatmap.
    Inputs longer than ``MODEL_VIEW_MAX_TOKENS`` are pooled into blocks of tokens.
    """
    attentions = np.asarray(attentions)                  # float16/float32 as given: no float64 copy
    if attentions.ndim != 4:
        raise ValueError(f"attentions must be (layers, heads, S, S), got shape {attentions.shape}")
    layers, heads, n = attentions.shape[0], attentions.shape[1], len(tokens)
    if n == 0 or layers == 0 or heads == 0:
        return empty_figure("No tokens")
    _check_map(attentions[0, 0], tokens)
    block = -(-n // MODEL_VIEW_MAX_TOKENS)
    pooled = pool_map(attentions, block)                                       # (L, nh, S', S')
    size, unit = pooled.shape[-1], "block" if block > 1 else "token"
    step = size + 1
    shapes = []
    if focus is not None:
        layer, head = focus
        if 0 <= layer < layers and 0 <= head < heads:
            shapes.append(dict(type="rect", x0=head * step - 0.7, x1=head * step + size - 0.3,
                               y0=layer * step - 0.7, y1=layer * step + size - 0.3,
                               line=dict(color="#dc2626", width=2)))
    middle = (size - 1) / 2
    annotations = ([dict(text=f"H{h}", x=h * step + middle, y=1.0, xref="x", yref="paper", yanchor="bottom",
                         showarrow=False) for h in range(heads)]
                   + [dict(text=f"L{shown_layer(r)}", x=0.0, y=r * step + middle, xref="paper", yref="y", xanchor="right",
                           xshift=-4, showarrow=False) for r in range(layers)])
    note = f" (pooled in blocks of {block} tokens)" if block > 1 else ""
    blank = dict(type="category", showticklabels=False, showgrid=False, zeroline=False, ticks="")
    return go.Figure(data=[dict(
        type="heatmap", z=tile_maps(pooled), x=_grid_labels(heads, size, "H", "key " + unit),
        y=_grid_labels(layers, size, "L", "query " + unit, first=shown_layer(0)), coloraxis="coloraxis",
        hoverongaps=False,
        hovertemplate="%{y} → %{x}<br>weight %{z:.3f}<extra></extra>")], layout=dict(
        title=dict(text=f"All {layers} layers (L1 to L{layers}) × {heads} heads (H0 to H{heads - 1}){note}<br>pick a "
                        "layer and head above to enlarge one (red frame)"),       # two lines: fits a phone
        height=min(1600, 64 * layers + 120), margin=dict(l=44, r=20, t=80, b=20), annotations=annotations,
        shapes=shapes, plot_bgcolor="rgba(0,0,0,0)", xaxis=blank, yaxis=dict(autorange="reversed", **blank),
        coloraxis=dict(colorscale=COLORSCALE, cmin=0.0, cmax=1.0, colorbar=dict(title="weight", thickness=10)),
    ))


def stats_heatmap(values: np.ndarray, title: str, focus: tuple[int, int] | None = None) -> go.Figure:
    """One statistic for every head: rows = layers (layer 1 at the top: row ``i`` of ``values`` is layer i + 1),
    columns = heads (from 0), values printed in four characters at most ("2.27", "12.3", "123"). ``focus`` is (row,
    head) of the framed head. Each head gets ``STATS_CELL_PX``, so no value runs into the next: a figure wider than
    a phone's screen scrolls sideways."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.size == 0:
        return empty_figure("No heads")
    layers, heads = values.shape
    shapes = []
    if focus is not None:
        layer, head = focus
        row = shown_layer(layer)
        shapes.append(dict(type="rect", x0=head - 0.5, x1=head + 0.5, y0=row - 0.5, y1=row + 0.5,
                           line=dict(color="#dc2626", width=2)))
    top = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.0
    decimals = 2 if top < 9.995 else 1 if top < 99.95 else 0           # "2.27", "12.3", "123": four digits at most
    return go.Figure(data=[dict(
        type="heatmap", z=compact(values), x=list(range(heads)), y=shown_layers(layers), colorscale="Viridis",
        texttemplate=f"%{{z:.{decimals}f}}", textfont=dict(size=10), colorbar=dict(thickness=12),
        hovertemplate="layer %{y}, head %{x}<br>" + title + " %{z:.3f}<extra></extra>",
    )], layout=dict(
        title=dict(text=f"{title}, per head", font=dict(size=14)), height=min(900, 34 * layers + 150), shapes=shapes,
        width=max(STATS_MIN_WIDTH, STATS_LEFT_PX + STATS_CELL_PX * heads + STATS_RIGHT_PX),
        margin=dict(l=STATS_LEFT_PX, r=STATS_RIGHT_PX, t=60, b=20), plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(title="head", tickmode="array", tickvals=list(range(heads)), showgrid=False),
        yaxis=dict(title="layer", tickmode="array", tickvals=shown_layers(layers), autorange="reversed",
                   showgrid=False),
    ))
