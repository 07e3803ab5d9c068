"""Pure figure builders for head ablation and for one head over training checkpoints.

Plain data in, plotly out (no Gradio, no tensor math). Tokens are placed by position with
their text as tick labels, as everywhere in the app.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.attention.plots import compact
from explorer.plots import COLORSCALE
from explorer.formatting import percent, sig
from explorer.plots import category_colors, empty_figure, plotly_text, probability_axis, tick_labels, top_value

BASELINE_COLOR = "#4f6bed"
ABLATED_COLOR = "#dc2626"
SHARE_STATS = ("cls", "sep", "self", "prev", "next")     # in [0, 1]: left panel over training
SCALE_STATS = ("entropy", "distance")                   # nats / tokens: right panel
STAT_COLORS = category_colors(SHARE_STATS + SCALE_STATS)
MAX_SMALL_MULTIPLE_LABELS = 24  # above this many tokens the small multiples drop their tick labels


def ablation_figure(tokens: Sequence[str], positions: Sequence[int], baseline_losses: Sequence[float],
                    ablated_losses: Sequence[float], fills: Sequence[Mapping[str, object]] = (),
                    is_next: tuple[float, float] | None = None, title: str = "") -> go.Figure:
    """Baseline vs ablated bars: per-token MLM loss, the [MASK] fillers' probabilities, P(IsNext).

    ``fills``: one dict per mask, ``{"position": int, "tokens": [str], "baseline": [p],
    "ablated": [p]}`` (the union of both runs' top tokens). ``is_next``: (baseline, ablated).
    """
    if len(positions) != len(baseline_losses) or len(positions) != len(ablated_losses):
        raise ValueError("positions and the two loss lists must have the same length")
    panels = (["loss"] if len(positions) else []) + [f"mask{i}" for i in range(len(fills))] + \
        (["nsp"] if is_next is not None else [])
    if not panels:
        return empty_figure("Nothing to compare: the input has no ordinary tokens, [MASK] or pair")
    titles = []
    for panel in panels:
        if panel == "loss":
            titles.append(f"MLM loss per token in nats (−ln p of the true token, masked in turn): mean "
                          f"{np.mean(baseline_losses):.3f} → {np.mean(ablated_losses):.3f} nats")
        elif panel == "nsp":
            titles.append(f"P(IsNext): {percent(is_next[0])} → {percent(is_next[1])}")
        else:
            fill = fills[int(panel[4:])]
            titles.append(f"[MASK] at position {fill['position']}: top fillers")
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=titles, vertical_spacing=min(0.15, 0.5 / len(panels)))
    top = top_value([f["baseline"] for f in fills] + [f["ablated"] for f in fills])    # one scale for every mask
    for row, panel in enumerate(panels, start=1):
        if panel == "loss":
            labels = [f"{p}: {plotly_text(tokens[p])}" for p in positions]
            xs = list(range(len(positions)))
            _bars(fig, row, xs, baseline_losses, ablated_losses, labels, show_legend=row == 1, unit="nats")
            tickvals, ticktext = tick_labels([tokens[p] for p in positions])
            fig.update_xaxes(tickmode="array", tickvals=tickvals, ticktext=ticktext, row=row, col=1)
            fig.update_yaxes(title_text="loss (nats)", exponentformat="none", row=row, col=1)
        elif panel == "nsp":
            _bars(fig, row, [0], [is_next[0]], [is_next[1]], ["IsNext"], show_legend=row == 1, unit="%")
            fig.update_xaxes(tickmode="array", tickvals=[0], ticktext=["P(IsNext)"], row=row, col=1)
            fig.update_yaxes(**probability_axis(1.0), row=row, col=1)
        else:
            fill = fills[int(panel[4:])]
            words = [plotly_text(word) for word in fill["tokens"]]
            xs = list(range(len(words)))
            _bars(fig, row, xs, fill["baseline"], fill["ablated"], words, show_legend=row == 1, unit="%")
            fig.update_xaxes(tickmode="array", tickvals=xs, ticktext=words, row=row, col=1)
            fig.update_yaxes(**probability_axis(top), row=row, col=1)
    fig.update_layout(
        title=dict(text=title or "Baseline (every head) vs ablated (chosen heads removed)"),
        barmode="group", height=260 * len(panels) + 80, margin=dict(l=20, r=20, t=90, b=20),
        legend=dict(orientation="h", yanchor="bottom", y=1.04, x=0), plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig


def _bars(fig: go.Figure, row: int, xs: Sequence[int], base: Sequence[float], ablated: Sequence[float],
          labels: Sequence[str], show_legend: bool, unit: str) -> None:
    """Baseline and ablated bars; their hover reads each value as a percentage (``unit="%"``) or in nats."""
    for name, values, color in (("baseline", base, BASELINE_COLOR), ("ablated", ablated, ABLATED_COLOR)):
        shown = [percent(float(v)) if unit == "%" else f"{sig(float(v))} {unit}" for v in values]
        fig.add_trace(go.Bar(
            x=list(xs), y=[float(v) for v in values], name=name, marker_color=color, legendgroup=name,
            showlegend=show_legend, customdata=[[label, text] for label, text in zip(labels, shown)],
            hovertemplate=f"%{{customdata[0]}}<br>{name} %{{customdata[1]}}<extra></extra>",
        ), row=row, col=1)


def checkpoint_maps_figure(maps: Sequence[np.ndarray], tokens: Sequence[Sequence[str]], labels: Sequence[str],
                           layer: int, head: int, columns: int = 3) -> go.Figure:
    """Small multiples: head (layer, head)'s map at each checkpoint, oldest first (``layer`` as shown, from 1)."""
    if not maps:
        return empty_figure("No checkpoints")
    if not (len(maps) == len(tokens) == len(labels)):
        raise ValueError("maps, tokens and labels must have one entry per checkpoint")
    cols = max(1, min(columns, len(maps)))
    rows = -(-len(maps) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[str(label) for label in labels],
                        horizontal_spacing=0.06, vertical_spacing=0.12 / rows)
    for index, (attn, toks) in enumerate(zip(maps, tokens)):
        attn = np.asarray(attn, dtype=float)
        if attn.shape != (len(toks), len(toks)):
            raise ValueError(f"checkpoint {labels[index]}: map {attn.shape} does not match {len(toks)} tokens")
        row, col = index // cols + 1, index % cols + 1
        fig.add_trace(go.Heatmap(
            z=compact(attn), coloraxis="coloraxis", customdata=[[labels[index]] * len(toks)] * len(toks),
            hovertemplate="%{customdata}<br>query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>",
        ), row=row, col=col)
        show = len(toks) <= MAX_SMALL_MULTIPLE_LABELS
        tickvals, ticktext = tick_labels(list(toks))
        fig.update_xaxes(tickmode="array", tickvals=tickvals, ticktext=ticktext, showticklabels=show,
                         tickangle=-60, tickfont=dict(size=9), row=row, col=col)
        fig.update_yaxes(tickmode="array", tickvals=tickvals, ticktext=ticktext, showticklabels=show,
                         autorange="reversed", tickfont=dict(size=9), row=row, col=col)
    fig.update_layout(
        title=dict(text=f"Layer {layer}, head {head} over training (rows = query, columns = key)"),
        height=330 * rows + 80, margin=dict(l=20, r=20, t=80, b=20),
        coloraxis=dict(colorscale=COLORSCALE, cmin=0.0, cmax=1.0, colorbar=dict(title="weight", thickness=10)),
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig


def stats_over_steps_figure(steps: Sequence[int | None], labels: Sequence[str],
                            stats: Mapping[str, Sequence[float]], titles: Mapping[str, str],
                            layer: int, head: int) -> go.Figure:
    """Lines of one head's statistics over checkpoints: shares (left), entropy and distance (right).

    The x axis is the training step when every checkpoint has one, else the checkpoint order.
    """
    count = len(labels)
    if count == 0:
        return empty_figure("No checkpoints")
    use_steps = all(s is not None for s in steps) and len(steps) == count
    xs = [int(s) for s in steps] if use_steps else list(range(count))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Share of attention", "Entropy and distance"),
                        horizontal_spacing=0.1)
    for col, names in ((1, SHARE_STATS), (2, SCALE_STATS)):
        for name in names:
            if name not in stats:
                continue
            values = [float(v) for v in stats[name]]
            if len(values) != count:
                raise ValueError(f"statistic {name!r} has {len(values)} values for {count} checkpoints")
            fig.add_trace(go.Scatter(
                x=xs, y=values, mode="lines+markers", name=titles.get(name, name),
                line=dict(color=STAT_COLORS.get(name)), customdata=list(labels),
                hovertemplate="%{customdata}<br>" + titles.get(name, name) + " %{y:.3f}<extra></extra>",
            ), row=1, col=col)
    axis = dict(title_text="training step") if use_steps else \
        dict(title_text="checkpoint", tickmode="array", tickvals=xs, ticktext=list(labels))
    fig.update_xaxes(**axis)
    fig.update_yaxes(range=[0, 1.02], row=1, col=1)
    fig.update_layout(
        title=dict(text=f"Layer {layer}, head {head}: statistics over training"), height=380,
        margin=dict(l=20, r=20, t=80, b=20), legend=dict(orientation="h", yanchor="top", y=-0.2, x=0),
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig
