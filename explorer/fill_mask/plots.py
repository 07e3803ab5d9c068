"""Pure figure builders for the Fill-mask tab: top-k bars per mask, and token probabilities over training.

Plain data in (token strings and probabilities), a plotly ``Figure`` out. No Gradio, no
tensor math. Candidates are plotted **by rank** (y = 0, 1, 2, ...) with the token text as
tick labels, so two candidates that decode to the same text stay separate bars.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.plots import axis_names, empty_figure, figure, plotly_text, probability_axis, subplot_grid, top_value
from explorer.formatting import percent

BAR_COLOR = "#4f6bed"
BEST_COLOR = "#f28e2b"
MAX_COLUMNS = 3          # masks side by side before wrapping to a new row
MAX_LINES = 15           # token lines per mask in the over-training chart (the table has all)
LINE_HEADROOM = 1.05     # the over-training axis ends a little above the highest point, so its marker shows whole
SCALES = "probability_scales"   # layout.meta of the top-k figure: {"shared": top, "own": [each mask's top]}


def _grid(n: int) -> tuple[int, int]:
    """(rows, cols) for ``n`` subplots, at most ``MAX_COLUMNS`` wide."""
    cols = max(1, min(n, MAX_COLUMNS))
    return math.ceil(n / cols), cols


def predictions_figure(tokens: Sequence[Sequence[str]], scores: Sequence[Sequence[float]],
                       titles: Sequence[str] | None = None, token_ids: Sequence[Sequence[int]] | None = None,
                       title: str | None = None, zoom: bool = False) -> go.Figure:
    """One horizontal bar chart per mask: the top-k candidates, best at the top.

    ``tokens[m][r]`` / ``scores[m][r]`` are mask m's rank-r candidate and probability.
    Subplot m is titled ``titles[m]`` (default "[MASK] 1", ...); the best bar is highlighted.
    Every chart shares one probability axis, from 0 to the highest probability of them all, with ticks
    as percentages, so bars compare across masks; ``zoom`` gives each chart its own axis, from 0 to its
    own highest probability (the axis title says so). Both scales stay in ``layout.meta`` for
    :func:`zoom_figure`, which switches between them without the predictions.
    """
    if len(tokens) != len(scores):
        raise ValueError(f"tokens ({len(tokens)}) and scores ({len(scores)}) differ in length (masks)")
    for m, (t, s) in enumerate(zip(tokens, scores)):
        if len(t) != len(s):
            raise ValueError(f"mask {m + 1}: {len(t)} tokens but {len(s)} scores")
    if titles is not None and len(titles) != len(tokens):
        raise ValueError(f"titles ({len(titles)}) and masks ({len(tokens)}) differ in length")
    n = len(tokens)
    if n == 0 or all(len(t) == 0 for t in tokens):
        return empty_figure("No predictions yet")
    titles = [plotly_text(t) for t in titles] if titles is not None else [f"[MASK] {m + 1}" for m in range(n)]
    rows, cols = _grid(n)
    k = max(len(t) for t in tokens)
    row_height = max(260, 120 + 26 * k)
    traces, axes = [], {}
    scales = {"shared": top_value(scores), "own": [top_value([s]) for s in scores]}
    for m in range(n):
        x_axis, y_axis = axis_names(m)
        ranks = list(range(len(tokens[m])))
        ids = token_ids[m] if token_ids is not None else [""] * len(ranks)
        shown = [plotly_text(token) for token in tokens[m]]
        traces.append(dict(
            type="bar", x=list(scores[m]), y=ranks, orientation="h", name=titles[m], showlegend=False,
            xaxis=x_axis, yaxis=y_axis, marker=dict(color=[BEST_COLOR if r == 0 else BAR_COLOR for r in ranks]),
            text=[percent(s) for s in scores[m]], textposition="auto", textfont=dict(size=11),
            customdata=[[shown[r], ids[r], r + 1, percent(scores[m][r])] for r in ranks],
            hovertemplate="#%{customdata[2]} %{customdata[0]}<br>id %{customdata[1]}<br>p = %{customdata[3]}"
                          f"<extra>{titles[m]}</extra>",
        ))
        axes[y_axis] = dict(tickmode="array", tickvals=ranks, ticktext=shown, autorange="reversed")
        axes[x_axis] = _scale_axis(scales, m, zoom)
    layout = subplot_grid(rows, cols, titles, horizontal_spacing=0.16,
                          vertical_spacing=min(0.3, 90 / (row_height * rows)) if rows > 1 else 0.1, **axes)
    return figure(traces, title=dict(text=title) if title else None, height=row_height * rows + (50 if title else 20),
                  margin=dict(l=20, r=20, t=60 if title else 40, b=30), bargap=0.2, plot_bgcolor="rgba(0,0,0,0)",
                  meta={SCALES: scales}, **layout)


def _scale_axis(scales: Mapping[str, Any], m: int, zoom: bool) -> dict[str, Any]:
    """Mask m's probability axis: the figure's shared scale, or with ``zoom`` its own (and its title says so)."""
    if zoom:
        return probability_axis(scales["own"][m], "probability (this chart's own scale)")
    return probability_axis(scales["shared"])


def zoom_figure(fig: go.Figure, zoom: bool) -> go.Figure:
    """``fig``, a :func:`predictions_figure` (also one read back from its JSON), with each mask's chart on its
    own probability scale (``zoom``) or all on the shared one: nothing is recomputed, the figure keeps both
    scales in ``layout.meta``. A figure without them (an empty one) comes back as it is."""
    meta = fig.layout.meta
    scales = meta.get(SCALES) if isinstance(meta, dict) else None
    if not scales:
        return fig
    fig.update_layout({axis_names(m)[0].replace("x", "xaxis"): _scale_axis(scales, m, zoom)
                       for m in range(len(scales["own"]))})
    return fig


def over_training_figure(steps: Sequence[int | None], labels: Sequence[str],
                         tracked: Sequence[Sequence[Mapping[str, float]]],
                         titles: Sequence[str] | None = None, max_lines: int = MAX_LINES) -> go.Figure:
    """Probability of each tracked token vs training step, one subplot per mask.

    ``tracked[c][m]`` maps token -> probability at mask m in checkpoint c (labelled
    ``labels[c]``, at training step ``steps[c]``). x is the step when every checkpoint has
    one, else the checkpoint's index with its label as tick text. Per mask, the
    ``max_lines`` tokens with the highest peak probability get a line. Every mask's plot shares one
    probability axis from 0 (ticks as percentages), so the lines compare across masks.
    """
    if not (len(steps) == len(labels) == len(tracked)):
        raise ValueError(f"steps ({len(steps)}), labels ({len(labels)}) and tracked ({len(tracked)}) "
                         "differ in length (checkpoints)")
    if not tracked or not tracked[0]:
        return empty_figure("No checkpoints probed yet")
    n = len(tracked[0])
    if any(len(per_mask) != n for per_mask in tracked):
        raise ValueError("every checkpoint must have the same number of masks")
    titles = [plotly_text(t) for t in titles] if titles is not None else [f"[MASK] {m + 1}" for m in range(n)]
    by_step = all(s is not None for s in steps)
    xs = list(steps) if by_step else list(range(len(labels)))
    shown: list[list[str]] = []
    subtitles: list[str] = []
    for m in range(n):
        tokens = list(dict.fromkeys(t for per_mask in tracked for t in per_mask[m]))
        peak = {t: max(per_mask[m].get(t, 0.0) for per_mask in tracked) for t in tokens}
        shown.append(sorted(tokens, key=lambda t: -peak[t])[:max(1, max_lines)])
        more = f" (top {len(shown[m])} of {len(tokens)} tokens)" if len(shown[m]) < len(tokens) else ""
        subtitles.append(titles[m] + more)
    top = top_value([per_mask[m].get(t, 0.0) for per_mask in tracked] for m in range(n) for t in shown[m])
    rows, cols = _grid(n)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=subtitles, horizontal_spacing=0.08,
                        vertical_spacing=min(0.3, 0.6 / rows) if rows > 1 else 0.1)
    for m in range(n):
        row, col = m // cols + 1, m % cols + 1
        for token in shown[m]:
            ys = [per_mask[m].get(token, 0.0) for per_mask in tracked]
            text = plotly_text(token)
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", name=text if n == 1 else f"{m + 1}: {text}",
                legendgroup=f"mask{m}", customdata=[[label, percent(y)] for label, y in zip(labels, ys)],
                hovertemplate=f"{text}<br>%{{customdata[0]}}<br>p = %{{customdata[1]}}<extra>{titles[m]}</extra>",
            ), row=row, col=col)
        fig.update_xaxes(title_text="training step" if by_step else "checkpoint", row=row, col=col,
                         **({} if by_step else dict(tickmode="array", tickvals=xs, ticktext=list(labels))))
        fig.update_yaxes(probability_axis(top * LINE_HEADROOM), row=row, col=col)   # one scale for every mask
    fig.update_layout(
        height=max(320, 300 * rows),
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(title=dict(text="token")),
        hovermode="closest",
    )
    return fig
