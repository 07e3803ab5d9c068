"""What the Attention tab's main action shows for one input, without widgets: every head's maps as the canvas
views' values (the tab's) or as Plotly figures (for Python callers), the statistics heatmap and table, and a
summary; inputs checked once (``attention_input``) and the forward cached per input. Plain arguments in, values
/ figures / text out; bad input raises ``gr.Error`` or ``ValueError``. The ablation, export and over-training
buttons are ``explorer.attention.actions``."""
from __future__ import annotations

import re
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from gradio.components.plot import PlotData
from plotly.io.json import to_json_plotly

from engine.probes.attention.maps import AttentionResult
from engine.probes.attention.head_stats import STAT_NAMES, STAT_TITLES
from explorer.attention import canvas, plots as attention_plots
from explorer.attention.actions import (DEFAULT_LENGTH, cached_attention, effective_length, model_shape, read_inputs,
                                        summary_markdown, view_heads)
from explorer.attention.sections import SHARE_STATS, TABLE_COLUMNS
from explorer.formatting import percent, sig
from explorer.layer_numbers import head_index, shown_layer
from explorer.services import Services
from explorer.views.export_names import export_info
from explorer.views.plot_names import named


def stats_table(result: AttentionResult) -> pd.DataFrame:
    """One row per head: its layer (from 1, as the tab numbers them), head, entropy and distance to 3
    significant digits, and the shares of attention as percentages; the two special tokens' columns named as the
    input writes them (BERT's ``[CLS]``, ``[SEP]``: ``TABLE_COLUMNS``; RoBERTa's ``<s>``, ``</s>``)."""
    rows = [[shown_layer(r["layer"]), r["head"], sig(r["entropy"]), *(percent(r[name]) for name in SHARE_STATS),
             sig(r["distance"])] for r in result.records()]
    columns = [*TABLE_COLUMNS[:3], *result.special_names(), *TABLE_COLUMNS[5:]]
    return pd.DataFrame(rows, columns=columns)


def attention_input(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                    layer: Any, head: Any, max_length: Any, heads: Any,
                    statistic: str | None) -> tuple[AttentionResult, int, int, list[int], str, str]:
    """(the cached result, the engine's layer index, head, the head view's heads, statistic, the input's id for
    the canvas views), inputs checked."""
    text, pair = read_inputs(text, text_pair)
    statistic = statistic or "entropy"
    if statistic not in STAT_NAMES:
        raise ValueError(f"unknown statistic {statistic!r}; choose from {', '.join(STAT_NAMES)}")
    with services.probing():
        loaded = services.model(model_key)
        index, head = head_index(*model_shape(loaded), layer, head)
        chosen = view_heads(heads, model_shape(loaded)[1])
        length = effective_length(services, loaded, max_length)
        result = cached_attention(services, loaded, text, pair, length)
    return result, index, head, chosen, statistic, canvas.input_id(loaded.model, text, pair, length)


def show_attention(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                   layer: Any, head: Any, max_length: Any = DEFAULT_LENGTH, heads: Any = None,
                   statistic: str | None = "entropy") -> tuple[go.Figure, go.Figure, go.Figure, go.Figure,
                                                               pd.DataFrame, str]:
    """As Plotly figures (for Python callers; the tab draws :func:`attention_views` on canvas): heatmap, head
    view, model view, statistics heatmap and table, and a summary."""
    result, index, head, chosen, statistic, _ = attention_input(services, model_key, text, text_pair, layer, head,
                                                                max_length, heads, statistic)
    tokens, number = result.tokens, shown_layer(index)
    return (attention_plots.attention_heatmap(result.attentions[index, head], tokens, number, head),
            attention_plots.head_view(result.attentions[index], tokens, chosen, number, focus=head),
            attention_plots.model_view(result.attentions, tokens, focus=(index, head)),
            attention_plots.stats_heatmap(result.stats.get(statistic), STAT_TITLES[statistic], focus=(index, head)),
            stats_table(result), summary_markdown(result, index, head))


def attention_views(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                    layer: Any, head: Any, max_length: Any = DEFAULT_LENGTH, heads: Any = None,
                    statistic: str | None = "entropy") -> tuple[Any, ...]:
    """The three canvas views' values (``explorer.attention.canvas``: compact arrays the browser draws), the
    statistics heatmap (no frame: the browser moves the chosen head without asking), the table and a summary."""
    result, index, head, chosen, statistic, view_id = attention_input(services, model_key, text, text_pair, layer,
                                                                      head, max_length, heads, statistic)
    return (*canvas.values(result, index, head, chosen, view_id), statistic_figure(result, statistic),
            stats_table(result), summary_markdown(result, index, head))


def statistic_figure(result: AttentionResult, statistic: str) -> go.Figure:
    """The statistics heatmap of ``statistic`` (no frame: the browser moves the chosen head without asking)."""
    return named(attention_plots.stats_heatmap(result.stats.get(statistic), STAT_TITLES[statistic]),
                 export_info(result.source, result.text, result.text_pair), f"Statistic per head {statistic}")


def with_png_name(fig: go.Figure, stem: str) -> PlotData:
    """The figure for ``gr.Plot`` with a modebar camera button that saves ``<stem>.png`` at 2x."""
    config = {"toImageButtonOptions": {"format": "png", "filename": re.sub(r"[^A-Za-z0-9_.-]", "_", stem),
                                       "scale": 2}, "displaylogo": False}
    return PlotData(type="plotly", plot=to_json_plotly({**fig.to_plotly_json(), "config": config}))
