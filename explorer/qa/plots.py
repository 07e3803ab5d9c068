"""Pure figure builders for the QA tab: start/end probabilities per window, and the windows on the text.

Plain data in, a plotly ``Figure`` out; no Gradio, no tensor math. Tokens are plotted **by
position** (x = 0, 1, 2, ... within a window's context tokens) with the token text as tick
labels, so repeated tokens stay separate bars.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go

from explorer.plots import (axis_names, empty_figure, figure, plotly_text, probability_axis, subplot_grid, tick_labels,
                            top_value)

START_COLOR = "#4f6bed"
END_COLOR = "#f28e2b"
WINDOW_COLOR = "#94a3b8"
ANSWER_COLOR = "rgba(22, 163, 74, 0.18)"
BEST_COLOR = "rgba(22, 163, 74, 0.35)"


@dataclass
class WindowProbs:
    """One window's context tokens and their start/end probabilities."""

    index: int                          # window number (0-based)
    tokens: list[str]                   # the window's context tokens
    start_probs: list[float]            # one per token
    end_probs: list[float]
    offsets: list[tuple[int, int]] = field(default_factory=list)       # characters of the context, per token
    answers: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last token index, label), best first


def probabilities_figure(windows: Sequence[WindowProbs], title: str | None = None) -> go.Figure:
    """Start and end probability bars over each window's context tokens, one subplot per window, all on
    one probability axis from 0 to the highest bar of any window (ticks as percentages).

    Answer spans are shaded (each window's best darker, and labelled with its ``label`` just above it). The
    window's name is its y axis's title ("window 1 · probability") and the legend stands at the right, so the
    only text in the strip above a plot is its answer label: a label never runs into a title or the legend.
    """
    for w in windows:
        if not (len(w.tokens) == len(w.start_probs) == len(w.end_probs)):
            raise ValueError(f"window {w.index}: {len(w.tokens)} tokens, {len(w.start_probs)} start and "
                             f"{len(w.end_probs)} end probabilities")
        if w.offsets and len(w.offsets) != len(w.tokens):
            raise ValueError(f"window {w.index}: {len(w.offsets)} offsets for {len(w.tokens)} tokens")
    if not windows or all(not w.tokens for w in windows):
        return empty_figure("No windows to show")
    rows = len(windows)
    traces, shapes, labels, axes = [], [], [], {}
    top = top_value([*w.start_probs, *w.end_probs] for w in windows)          # one scale for every window
    for r, w in enumerate(windows):
        x_axis, y_axis = axis_names(r)
        traces += _window_bars(w, r, x_axis, y_axis)
        for rank, (first, last, label) in enumerate(w.answers):
            shapes.append(span_shade(first - 0.5, last + 0.5, x_axis, f"{y_axis} domain", rank, "below"))
            if rank == 0:
                labels.append(span_label(label, first - 0.5, x_axis, f"{y_axis} domain"))
        tickvals, ticktext = tick_labels(w.tokens)
        axes[x_axis] = dict(tickmode="array", tickvals=tickvals, ticktext=ticktext, tickangle=-60,
                            range=[-0.5, len(w.tokens) - 0.5])
        axes[y_axis] = probability_axis(top, title=window_title(w.index))
    layout = subplot_grid(rows, 1, (), vertical_spacing=min(0.16, 0.6 / rows) if rows > 1 else 0.1, **axes)
    layout["annotations"] += labels
    return figure(traces, title=dict(text=title) if title else None, height=80 + 300 * rows, shapes=shapes,
                  margin=dict(l=50, r=20, t=80 if title else 40, b=40), barmode="group", bargap=0.15,
                  legend=dict(orientation="v", yanchor="top", y=1, xanchor="left", x=1.01),
                  plot_bgcolor="rgba(0,0,0,0)", **layout)


def window_title(index: int) -> str:
    """The y axis title of window ``index`` (0-based): which window, and what the bars are."""
    return f"window {index + 1} · probability"


def _window_bars(w: WindowProbs, row: int, x_axis: str, y_axis: str) -> list[dict]:
    """The start and end bars of one window (the legend entries from the first window only)."""
    x = list(range(len(w.tokens)))
    chars = [f"{a}–{b}" for a, b in w.offsets] if w.offsets else [""] * len(x)
    custom = [[plotly_text(t), c] for t, c in zip(w.tokens, chars)]
    return [dict(type="bar", x=x, y=list(probs), name=f"p({name})", marker=dict(color=color), offsetgroup=name,
                 legendgroup=name, showlegend=row == 0, customdata=custom, xaxis=x_axis, yaxis=y_axis,
                 hovertemplate=f"position %{{x}}: %{{customdata[0]}}<br>characters %{{customdata[1]}}"
                               f"<br>p({name}) = %{{y:.3p}}<extra>window {w.index + 1}</extra>")
            for name, probs, color in (("start", w.start_probs, START_COLOR), ("end", w.end_probs, END_COLOR))]


def span_shade(x0: float, x1: float, xref: str, yref: str, rank: int, layer: str) -> dict:
    """A shaded answer span over the whole height of a plot (the best answer darker)."""
    return dict(type="rect", x0=x0, x1=x1, y0=0, y1=1, xref=xref, yref=yref, layer=layer, line=dict(width=0),
                fillcolor=BEST_COLOR if rank == 0 else ANSWER_COLOR)


def span_label(text: str, x: float, xref: str, yref: str) -> dict:
    """The best answer's label, above the top left corner of its span."""
    return dict(text=text, x=x, y=1, xref=xref, yref=yref, xanchor="left", yanchor="bottom", showarrow=False,
                font=dict(size=10))


def windows_figure(context_length: int, windows: Sequence[tuple[int, int]],
                   answers: Sequence[tuple[int, int, str]] = (), title: str | None = None) -> go.Figure:
    """Which characters of the context each window reads: one horizontal bar per window.

    ``windows[i]`` is window i's (start, end) character range; overlapping bars are the
    ``doc_stride`` overlap. ``answers`` ((start, end, label), best first) are shaded across
    all windows so one can see which window(s) hold them; the best answer (the first entry, and every
    later entry with its label: its other places) darker and labelled.
    """
    if context_length < 0:
        raise ValueError(f"context_length must be >= 0, got {context_length}")
    if not windows:
        return empty_figure("No windows to show")
    names = [f"window {i + 1}" for i in range(len(windows))]
    bars = dict(
        type="bar", y=list(range(len(windows))), x=[end - start for start, end in windows],
        base=[start for start, _ in windows], orientation="h", marker=dict(color=WINDOW_COLOR), name="window",
        showlegend=False, customdata=[[n, start, end] for n, (start, end) in zip(names, windows)],
        text=[f"{start}–{end}" for start, end in windows], textposition="inside", insidetextanchor="middle",
        hovertemplate="%{customdata[0]}: characters %{customdata[1]}–%{customdata[2]}<extra></extra>",
    )
    best = answers[0][2] if answers else None
    shapes = [span_shade(start, max(end, start + 1), "x", "y domain", 0 if label == best else 1, "above")
              for start, end, label in answers]
    labels = [span_label(label, start, "x", "y domain") for start, _, label in answers if label == best]
    return figure(
        [bars], title=dict(text=title) if title else None, shapes=shapes, annotations=labels,
        height=120 + 34 * len(windows),
        margin=dict(l=20, r=20, t=60 if title else 30, b=40),
        xaxis=dict(title=dict(text="character of the context"), range=[0, max(1, context_length)], zeroline=False),
        yaxis=dict(tickmode="array", tickvals=list(range(len(windows))), ticktext=names, autorange="reversed"),
        bargap=0.3,
        plot_bgcolor="rgba(0,0,0,0)",
    )
