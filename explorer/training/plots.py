"""Pure figure builders for the Training tab's masking view: the masked-batch strip and its table rows.

Plain data in (the ``current_batch()`` dict), a plotly ``Figure`` out. No Gradio and no tensor math here; the
curves are ``explorer.runs.plots``.
"""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from engine.data.masking import DEFAULT_MASK_MIX
from explorer.plots import empty_figure, plotly_text, tick_labels

# One colour per masking kind (the names match ``engine.data.masking.KIND_NAMES``).
KIND_COLORS: dict[str, str] = {
    "none": "#d1d5db",     # light grey: not selected for prediction
    "[MASK]": "#dc2626",   # red: replaced by [MASK] (80%)
    "random": "#f59e0b",   # amber: replaced by a random token (10%)
    "kept": "#16a34a",     # green: left as is but still predicted (10%)
}


def kind_labels(mask_mix: Sequence[float] | None = None, mask_token: str | None = None) -> dict[str, str]:
    """The legend's words for each masking kind, with the run's shares (BERT's 80/10/10 when not given) and its
    mask token (RoBERTa's ``<mask>``; written so Plotly shows it as text, not as a tag)."""
    mask, random, kept = (DEFAULT_MASK_MIX if mask_mix is None or len(mask_mix) != 3 else mask_mix)
    shown = html.escape(mask_token or "mask token")
    return {"none": "not masked", "[MASK]": f"→ {shown} ({mask:.0%})", "random": f"→ random token ({random:.0%})",
            "kept": f"kept, still predicted ({kept:.0%})"}


KIND_LABELS: dict[str, str] = kind_labels(DEFAULT_MASK_MIX, "[MASK]")   # BERT's, the default


def masked_strip(tokens: Sequence[str], kinds: Sequence[str],
                 label_tokens: Sequence[str | None] | None = None, title: str | None = None,
                 legend: Mapping[str, str] = KIND_LABELS) -> go.Figure:
    """One cell per token at x = position, coloured by masking kind (``KIND_COLORS``).

    ``tokens`` are what the model sees (after masking); ``label_tokens`` the originals it
    must predict (None where nothing is predicted). Hover shows both; predicted cells also
    carry the original token as their text. One bar trace per kind present, named by ``legend``
    (``kind_labels``).
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
        custom = [[plotly_text(tokens[i]), plotly_text(labels[i]) if labels[i] is not None else "—"] for i in pos]
        fig.add_trace(go.Bar(
            x=pos, y=[1] * len(pos), width=0.92,
            name=legend.get(kind, kind),
            marker=dict(color=KIND_COLORS.get(kind, "#94a3b8"), line=dict(width=0)),
            text=[plotly_text(labels[i] or "") for i in pos] if kind != "none" else None,
            textposition="inside" if kind != "none" else "none",
            insidetextanchor="middle", textangle=-90, textfont=dict(color="white"),
            customdata=custom,
            hovertemplate=("position %{x}<br>input %{customdata[0]}<br>original %{customdata[1]}"
                           "<extra>" + legend.get(kind, kind) + "</extra>"),
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
                        title=f"Step {batch.get('step', '?')}: sequence {row + 1} of the batch{pair}",
                        legend=kind_labels(batch.get("mask_mix"), batch.get("mask_token")))


def masked_rows(batch: Mapping[str, Any] | None, row: int = 0) -> list[list[Any]]:
    """``[position, input token, original token, kind]`` for each predicted position of ``row``."""
    if not batch or not batch.get("rows") or row >= len(batch["rows"]):
        return []
    r = batch["rows"][row]
    return [[i, tok, lab, kind]
            for i, (tok, lab, kind) in enumerate(zip(r["tokens"], r["label_tokens"], r["mask_kind_names"]))
            if kind != "none"]
