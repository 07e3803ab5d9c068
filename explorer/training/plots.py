"""Pure figure builders for the Training tab: training curves and the masked-batch strip.

Plain data in (the worker's metric records, the ``current_batch()`` dict), a plotly
``Figure`` out. No Gradio and no tensor math here.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from explorer.plots import empty_figure, figure, tick_labels

# One colour per masking kind (the names match ``engine.data.masking.KIND_NAMES``).
KIND_COLORS: dict[str, str] = {
    "none": "#d1d5db",     # light grey: not selected for prediction
    "[MASK]": "#dc2626",   # red: replaced by [MASK] (80%)
    "random": "#f59e0b",   # amber: replaced by a random token (10%)
    "kept": "#16a34a",     # green: left as is but still predicted (10%)
}
KIND_LABELS: dict[str, str] = {
    "none": "not masked",
    "[MASK]": "→ [MASK] (80%)",
    "random": "→ random token (10%)",
    "kept": "kept, still predicted (10%)",
}

TRAIN_COLOR = "#4f6bed"
EVAL_COLOR = "#f28e2b"

# (record kind, key, legend name, colour, dash) for each curve figure.
Series = tuple[str, str, str, str, str]
MLM_LOSS_SERIES: list[Series] = [("train", "mlm_loss", "train", TRAIN_COLOR, "solid"),
                                 ("eval", "eval_mlm_loss", "eval", EVAL_COLOR, "solid")]
NSP_LOSS_SERIES: list[Series] = [("train", "nsp_loss", "train", TRAIN_COLOR, "solid"),
                                 ("eval", "eval_nsp_loss", "eval", EVAL_COLOR, "solid")]
ACCURACY_SERIES: list[Series] = [("train", "mlm_acc", "MLM train", TRAIN_COLOR, "solid"),
                                 ("eval", "eval_mlm_acc", "MLM eval", TRAIN_COLOR, "dot"),
                                 ("train", "nsp_acc", "NSP train", EVAL_COLOR, "solid"),
                                 ("eval", "eval_nsp_acc", "NSP eval", EVAL_COLOR, "dot")]
LR_SERIES: list[Series] = [("train", "lr", "learning rate", "#7c3aed", "solid")]


MAX_POINTS = 1000       # points per curve sent to the browser (a long run is downsampled: ``downsample``)


def _points(records: Sequence[Mapping[str, Any]], kind: str, key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        if r.get("kind") != kind:
            continue
        value, step = r.get(key), r.get("step")
        # Records read from a run's file (a watched run's) may hold anything: a point needs a number.
        if step is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        xs.append(int(step))
        ys.append(float(value))
    return xs, ys


def downsample(xs: Sequence[int], ys: Sequence[float], max_points: int = MAX_POINTS) -> tuple[list[int], list[float]]:
    """At most ``max_points`` of a curve, its shape kept: the first and last points always, and between them
    the lowest and the highest point of each of ``(max_points - 2) // 2`` equal buckets, in step order, so a
    spike or a dip stays visible (min/max decimation). A curve that fits is returned unchanged."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, got {max_points}")
    buckets = (max_points - 2) // 2
    keep = {0, n - 1}
    inner = n - 2
    for b in range(buckets):
        lo, hi = 1 + b * inner // buckets, 1 + (b + 1) * inner // buckets
        if lo >= hi:
            continue
        segment = range(lo, hi)
        keep.add(min(segment, key=ys.__getitem__))
        keep.add(max(segment, key=ys.__getitem__))
    order = sorted(keep)
    return [xs[i] for i in order], [ys[i] for i in order]


def curves_figure(records: Sequence[Mapping[str, Any]], series: Sequence[Series], title: str,
                  y_title: str = "", empty_message: str = "No steps logged yet",
                  y_range: Sequence[float] | None = None, max_points: int = MAX_POINTS,
                  tickformat: str | None = None) -> go.Figure:
    """One line per ``series`` entry that has points (x = step, at most ``max_points`` each); an empty
    figure if none has. Ticks never use SI prefixes or e-notation (a learning rate reads 0.0004, not 400μ)."""
    traces = []
    for kind, key, name, color, dash in series:
        xs, ys = _points(records, kind, key)
        if not xs:
            continue
        xs, ys = downsample(xs, ys, max_points)
        traces.append(dict(
            type="scatter", x=xs, y=ys, name=name,
            mode="lines+markers" if kind == "eval" or len(xs) == 1 else "lines",
            line=dict(color=color, dash=dash, width=2),
            hovertemplate=f"step %{{x}}<br>{name} %{{y:.3g}}<extra></extra>",
        ))
    if not traces:
        return empty_figure(f"{title}: {empty_message.lower()}")
    return figure(
        traces,
        title=dict(text=title),
        height=280,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        xaxis=dict(title=dict(text="step")),
        yaxis=dict(title=dict(text=y_title), range=list(y_range) if y_range is not None else None,
                   exponentformat="none", tickformat=tickformat),
        hovermode="x unified",
    )


def mlm_loss_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    return curves_figure(records, MLM_LOSS_SERIES, "MLM loss", "cross-entropy")


def nsp_loss_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    return curves_figure(records, NSP_LOSS_SERIES, "NSP loss", "cross-entropy",
                         empty_message="No NSP steps logged yet (or NSP is off)")


def accuracy_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    return curves_figure(records, ACCURACY_SERIES, "Accuracy", "accuracy", y_range=(0.0, 1.0), tickformat=".0%")


def lr_figure(records: Sequence[Mapping[str, Any]]) -> go.Figure:
    return curves_figure(records, LR_SERIES, "Learning rate", "lr")


def masked_strip(tokens: Sequence[str], kinds: Sequence[str],
                 label_tokens: Sequence[str | None] | None = None, title: str | None = None) -> go.Figure:
    """One cell per token at x = position, coloured by masking kind (``KIND_COLORS``).

    ``tokens`` are what the model sees (after masking); ``label_tokens`` the originals it
    must predict (None where nothing is predicted). Hover shows both; predicted cells also
    carry the original token as their text. One bar trace per kind present.
    """
    if len(tokens) != len(kinds):
        raise ValueError(f"tokens ({len(tokens)}) and kinds ({len(kinds)}) differ in length")
    if label_tokens is not None and len(label_tokens) != len(tokens):
        raise ValueError(f"label_tokens ({len(label_tokens)}) and tokens ({len(tokens)}) differ in length")
    n = len(tokens)
    if n == 0:
        return empty_figure("No batch yet: start a run")
    labels = list(label_tokens) if label_tokens is not None else [None] * n
    fig = go.Figure()
    order = [k for k in KIND_COLORS if k in kinds] + sorted({k for k in kinds if k not in KIND_COLORS})
    for kind in order:
        pos = [i for i, k in enumerate(kinds) if k == kind]
        custom = [[tokens[i], labels[i] if labels[i] is not None else "—"] for i in pos]
        fig.add_trace(go.Bar(
            x=pos, y=[1] * len(pos), width=0.92,
            name=KIND_LABELS.get(kind, kind),
            marker=dict(color=KIND_COLORS.get(kind, "#94a3b8"), line=dict(width=0)),
            text=[labels[i] or "" for i in pos] if kind != "none" else None,
            textposition="inside" if kind != "none" else "none",
            insidetextanchor="middle", textangle=-90, textfont=dict(color="white"),
            customdata=custom,
            hovertemplate=("position %{x}<br>input %{customdata[0]}<br>original %{customdata[1]}"
                           "<extra>" + KIND_LABELS.get(kind, kind) + "</extra>"),
        ))
    tickvals, ticktext = tick_labels(list(tokens))
    fig.update_layout(
        title=dict(text=title) if title else None,
        height=300,
        margin=dict(l=20, r=20, t=50 if title else 30, b=20),
        barmode="overlay", bargap=0.0, showlegend=True,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
        plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(title="position (tick = input token; cell text = original token)", tickmode="array",
                   tickvals=tickvals, ticktext=ticktext, tickangle=-60 if n > 12 else 0,
                   range=[-0.5, n - 0.5], showgrid=False, zeroline=False),
        yaxis=dict(visible=False, range=[0, 1], fixedrange=True),
        uniformtext=dict(minsize=7, mode="hide"),
    )
    return fig


def batch_figure(batch: Mapping[str, Any] | None, row: int = 0) -> go.Figure:
    """The masked strip of sequence ``row`` of a ``current_batch()`` dict (empty figure if none)."""
    if not batch or not batch.get("rows") or row >= len(batch["rows"]):
        return empty_figure("No batch yet: start a run")
    r = batch["rows"][row]
    nsp = batch.get("next_sentence_label") or []
    pair = ""
    if row < len(nsp) and nsp[row] in (0, 1):
        pair = " · B follows A" if nsp[row] == 0 else " · B is a random sentence"
    return masked_strip(r["tokens"], r["mask_kind_names"], r.get("label_tokens"),
                        title=f"Step {batch.get('step', '?')}: sequence {row + 1} of the batch{pair}")


def masked_rows(batch: Mapping[str, Any] | None, row: int = 0) -> list[list[Any]]:
    """``[position, input token, original token, kind]`` for each predicted position of ``row``."""
    if not batch or not batch.get("rows") or row >= len(batch["rows"]):
        return []
    r = batch["rows"][row]
    return [[i, tok, lab, kind]
            for i, (tok, lab, kind) in enumerate(zip(r["tokens"], r["label_tokens"], r["mask_kind_names"]))
            if kind != "none"]
