"""Pure plot builders: plain data in, a plotly ``Figure`` out.

No Gradio and no tensor math here, so every builder is unit-testable without a browser.
Tokens are always plotted **by position** (x = 0, 1, 2, ...) with the token text as tick
labels, so repeated tokens (two ``the``s, several ``[SEP]``s) stay separate cells.
"""
from __future__ import annotations

import html

import math
from collections.abc import Iterable, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import make_colorscale, qualitative, sequential

# Attention weights in every tab (Attention, Compare, Heads): white to dark blue (ColorBrewer "Blues", nine evenly
# spaced stops); the SVG/PNG exports use the same stops.
COLORSCALE: list[list[float | str]] = make_colorscale(sequential.Blues)

# Segment colours shared by every view that colours tokens by segment.
SEGMENT_COLORS: dict[str, str] = {
    "A": "#4f6bed",        # indigo: segment A (type id 0)
    "B": "#f28e2b",        # orange: segment B (type id 1)
    "special": "#9aa0a6",  # grey: [CLS] / [SEP] / [PAD]
}
# Lines and bars that only need to look different (one per metric, statistic, component): d3's category10,
# whose mid-tone colours read on a white and on a dark page alike. Colours that carry a meaning (segments
# above, which assets/style.css repeats; the masking kinds; baseline vs ablated) are named where they are used.
CATEGORY_COLORS: tuple[str, ...] = tuple(qualitative.D3)
SEGMENT_NAMES: dict[str, str] = {
    "A": "Segment A (type 0)",
    "B": "Segment B (type 1)",
    "special": "Special token",
}


def category_colors(names: Sequence[str]) -> dict[str, str]:
    """One ``CATEGORY_COLORS`` colour per name, in order (cycled past ten names)."""
    return {name: CATEGORY_COLORS[i % len(CATEGORY_COLORS)] for i, name in enumerate(names)}

# Figures and themes. Every figure is drawn on a transparent paper and plot, so it takes the page's
# colour in light and in dark mode; grid lines are a grey at low opacity, which reads on both.
# Text is FONT_COLOR, a dark slate chosen for this purpose only: in dark mode assets/style.css turns
# every SVG text of exactly that colour light (Plotly writes it as an inline fill, which `!important`
# overrides), and leaves text with a colour of its own (white labels in bars, heatmap cell values) alone.
TRANSPARENT = "rgba(0,0,0,0)"
FONT_COLOR = "#334155"                        # rgb(51, 65, 85); the CSS matches this exact fill
GRID_COLOR = "rgba(128,128,128,0.25)"
ZERO_LINE_COLOR = "rgba(128,128,128,0.5)"
TEMPLATE_NAME = "bert_explorer"
_NO_OUTLINE = dict(colorbar=dict(outlinewidth=0, ticks=""))
_AXIS = dict(gridcolor=GRID_COLOR, linecolor=GRID_COLOR, zerolinecolor=ZERO_LINE_COLOR, zerolinewidth=1,
             ticks="", title=dict(standoff=15), automargin=True)
TEMPLATE = go.layout.Template(
    layout=dict(
        # what plotly's default template gave that the figures rely on (axis types, colours, margins)
        autotypenumbers="strict", colorway=qualitative.Plotly, hovermode="closest",
        colorscale=pio.templates["plotly"].layout.colorscale, title=dict(x=0.05),
        font=dict(color=FONT_COLOR), paper_bgcolor=TRANSPARENT, plot_bgcolor=TRANSPARENT,
        hoverlabel=dict(align="left"), legend=dict(bgcolor=TRANSPARENT), coloraxis=_NO_OUTLINE,
        xaxis=_AXIS, yaxis=_AXIS, modebar=dict(bgcolor=TRANSPARENT, color="rgba(128,128,128,0.7)",
                                                activecolor="rgba(128,128,128,1)"),
    ),
    data=dict(heatmap=[_NO_OUTLINE], scatter=[dict(marker=_NO_OUTLINE)], bar=[dict(marker=_NO_OUTLINE)]),
)
# The default for every figure of the process, so no builder and no endpoint passes a theme. It also
# replaces plotly's own 7 KB default template, which every figure copied and sent (about 1 ms each).
pio.templates[TEMPLATE_NAME] = TEMPLATE
pio.templates.default = TEMPLATE_NAME

# Above these many tokens the strip drops in-cell numbers / thins its tick labels.
_MAX_CELL_LABELS = 48
_MAX_TICK_LABELS = 96
MAX_PERCENT_DECIMALS = 8      # a probability axis reads down to 0.00000001%


def figure(traces: Sequence[dict] = (), **layout: object) -> go.Figure:
    """A figure made in one construction from plain-dict traces (``type="heatmap"``, ...) and layout.

    Plotly validates every property once here; building trace objects and then calling
    ``add_trace`` / ``update_layout`` validates them again, property by property, and costs 2-5x
    more (the probing endpoints' largest cost after the model: docs/design/lessons.md).
    """
    return go.Figure(data=list(traces), layout=layout)


def subplot_grid(rows: int, cols: int, titles: Sequence[str] = (), horizontal_spacing: float = 0.08,
                 vertical_spacing: float = 0.1, **axes: dict) -> dict:
    """A layout for a rows x cols grid of plots (row 0 on top), as ``make_subplots`` lays it out, with
    ``titles`` above the plots; ``axes["x1"]`` / ``axes["y3"]`` add properties to one plot's axis.
    Plot i (0-based, row-major) draws on axes ``x{i+1}`` / ``y{i+1}`` (``axis_names``)."""
    width = (1 - horizontal_spacing * (cols - 1)) / cols
    height = (1 - vertical_spacing * (rows - 1)) / rows
    layout: dict = {"annotations": []}
    for i in range(rows * cols):
        row, col = divmod(i, cols)
        left, top = col * (width + horizontal_spacing), 1 - row * (height + vertical_spacing)
        x, y = axis_names(i)
        x_domain = [max(0.0, left), min(1.0, left + width)]            # rounding must not leave [0, 1]
        y_domain = [max(0.0, top - height), min(1.0, top)]
        layout[x.replace("x", "xaxis")] = dict(domain=x_domain, anchor=y, **axes.get(x, {}))
        layout[y.replace("y", "yaxis")] = dict(domain=y_domain, anchor=x, **axes.get(y, {}))
        if i < len(titles):
            layout["annotations"].append(dict(text=titles[i], x=left + width / 2, y=top, xref="paper", yref="paper",
                                              xanchor="center", yanchor="bottom", showarrow=False,
                                              font=dict(size=16)))
    return layout


def percent_tickformat(top: float) -> str:
    """The d3 tick format of an axis of probabilities from 0 to ``top``: percentages with just enough
    decimals to tell Plotly's ticks apart (about ten at most): 0.43 -> ".0%", 0.048 -> ".1%", 0.00018 ->
    ".3%". Never an SI prefix ("20μ") nor an exponent ("2e-05"), which a learner cannot read as a probability."""
    step = abs(top) * 100 / 10                      # percent between ticks, at the most ticks Plotly draws
    if not math.isfinite(step) or step <= 0:
        return ".0%"
    return f".{min(MAX_PERCENT_DECIMALS, max(0, -math.floor(math.log10(step))))}%"


def probability_axis(top: float, title: str | None = "probability") -> dict[str, Any]:
    """An axis of probabilities from 0 to ``top`` (to 1 when ``top`` is not a positive number), its ticks
    as percentages (:func:`percent_tickformat`). Several plots of one figure given the same ``top`` share
    one scale: a bar of 4.8% is then a tenth as long as one of 48%, in every plot."""
    upper = float(top) if math.isfinite(top) and top > 0 else 1.0
    axis: dict[str, Any] = dict(range=[0.0, upper], autorange=False, tickformat=percent_tickformat(upper),
                                exponentformat="none")
    if title is not None:
        axis["title"] = dict(text=title)
    return axis


def top_value(values: Iterable[Iterable[float]]) -> float:
    """The largest finite value of several lists (0.0 for none): the shared top of a probability axis."""
    return max((float(v) for row in values for v in row if math.isfinite(v)), default=0.0)


def axis_names(index: int) -> tuple[str, str]:
    """Plotly's axis names of plot ``index`` (0-based): ("x", "y"), ("x2", "y2"), ..."""
    suffix = "" if index == 0 else str(index + 1)
    return f"x{suffix}", f"y{suffix}"


def empty_figure(message: str = "Nothing to show yet", height: int = 220) -> go.Figure:
    """A valid, empty figure that shows ``message`` in its middle."""
    return figure(
        height=height,
        margin=dict(l=20, r=20, t=30, b=20),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
        annotations=[
            dict(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                 showarrow=False, font=dict(size=14, color="#6b7280"))
        ],
    )


def plotly_text(text: str) -> str:
    """``text`` as Plotly shows it literally: its ``<``, ``>`` and ``&`` as entities, since Plotly reads a few tags
    in labels (RoBERTa's ``<s>`` would strike the rest through and vanish)."""
    return html.escape(text, quote=False)


def tick_labels(tokens: Sequence[str]) -> tuple[list[int], list[str]]:
    """Tick positions and texts (``plotly_text``); thinned to every k-th position for long sequences."""
    n = len(tokens)
    step = 1 if n <= _MAX_TICK_LABELS else -(-n // _MAX_TICK_LABELS)
    positions = list(range(0, n, step))
    return positions, [plotly_text(tokens[i]) for i in positions]


def _check_lengths(tokens: Sequence[str], segments: Sequence[str], ids: Sequence[int] | None,
                   type_ids: Sequence[int] | None) -> None:
    """``ValueError`` unless ``segments`` (and ``ids`` / ``type_ids`` when given) have one entry per token."""
    if len(tokens) != len(segments):
        raise ValueError(f"tokens ({len(tokens)}) and segments ({len(segments)}) differ in length")
    if ids is not None and len(ids) != len(tokens):
        raise ValueError(f"ids ({len(ids)}) and tokens ({len(tokens)}) differ in length")
    if type_ids is not None and len(type_ids) != len(tokens):
        raise ValueError(f"type_ids ({len(type_ids)}) and tokens ({len(tokens)}) differ in length")


def _segment_trace(seg: str, pos: list[int], tokens: Sequence[str], ids: Sequence[int] | None,
                   type_ids: Sequence[int] | None, show_text: bool) -> dict[str, Any]:
    """The bar trace of one segment's cells at positions ``pos`` (numbered inside when ``show_text``)."""
    custom = [
        [plotly_text(tokens[i]), ids[i] if ids is not None else "", type_ids[i] if type_ids is not None else ""]
        for i in pos
    ]
    return dict(
        type="bar",
        x=pos,
        y=[1] * len(pos),
        width=0.92,
        name=SEGMENT_NAMES.get(seg, seg),
        marker=dict(color=SEGMENT_COLORS.get(seg, "#cbd5e1"), line=dict(width=0)),
        text=[str(i) for i in pos] if show_text else None,  # position in the cell
        textposition="inside" if show_text else "none",
        insidetextanchor="middle",
        textangle=0,
        textfont=dict(color="white"),
        customdata=custom,
        hovertemplate=(
            "position %{x}<br>token %{customdata[0]}<br>id %{customdata[1]}"
            "<br>type id %{customdata[2]}<extra>" + SEGMENT_NAMES.get(seg, seg) + "</extra>"
        ),
    )


def token_strip(
    tokens: Sequence[str],
    segments: Sequence[str],
    ids: Sequence[int] | None = None,
    type_ids: Sequence[int] | None = None,
    title: str | None = None,
) -> go.Figure:
    """One cell per token at x = position, coloured by segment ("A", "B" or "special").

    Tick labels are the token texts, the cells carry their position number. One bar trace
    per segment present (so the legend reads A / B / special); each bar sits at its own
    integer position, so repeated tokens never merge. Hover shows position, token, id and
    type id. Empty input gives :func:`empty_figure`.
    """
    _check_lengths(tokens, segments, ids, type_ids)
    n = len(tokens)
    if n == 0:
        return empty_figure("No tokens")

    show_text = n <= _MAX_CELL_LABELS
    order = [s for s in ("A", "B", "special") if s in segments]
    order += sorted({s for s in segments if s not in SEGMENT_COLORS})  # unknown labels last
    traces = [_segment_trace(seg, [i for i, s in enumerate(segments) if s == seg], tokens, ids, type_ids, show_text)
              for seg in order]
    tickvals, ticktext = tick_labels(tokens)
    return figure(
        traces,
        title=dict(text=title) if title else None,
        height=240 if n <= 16 else 300,
        margin=dict(l=20, r=20, t=50 if title else 30, b=20),
        barmode="overlay",
        bargap=0.0,
        showlegend=True,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
        plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(
            title="position",
            tickmode="array",
            tickvals=tickvals,
            ticktext=ticktext,
            tickangle=-60 if n > 12 else 0,
            range=[-0.5, n - 0.5],
            showgrid=False,
            zeroline=False,
        ),
        yaxis=dict(visible=False, range=[0, 1], fixedrange=True),
        uniformtext=dict(minsize=8, mode="hide"),
    )
