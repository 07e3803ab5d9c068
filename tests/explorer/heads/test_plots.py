"""Heads tab figure builders: bars by position with the labels as ticks, the [CLS] attention heatmap."""
from __future__ import annotations

import pytest

from explorer.formatting import percent
from explorer.heads import plots


def test_bars_keep_order_and_repeated_labels_and_highlight_the_best() -> None:
    fig = plots.probability_bars(["yes", "no", "yes"], [0.2, 0.5, 0.3], title="t")
    bars = fig.data[0]
    assert list(bars.y) == [0, 1, 2] and list(bars.x) == [0.2, 0.5, 0.3]
    assert list(fig.layout.yaxis.ticktext) == ["yes", "no", "yes"] and fig.layout.yaxis.autorange == "reversed"
    assert list(bars.text) == [percent(0.2), percent(0.5), percent(0.3)]
    assert list(bars.marker.color) == [plots.BAR_COLOR, plots.BEST_COLOR, plots.BAR_COLOR]
    assert list(fig.layout.xaxis.range) == [0, 1]
    chosen = plots.probability_bars(["a", "b"], [0.9, 0.1], best=1)
    assert list(chosen.data[0].marker.color) == [plots.BAR_COLOR, plots.BEST_COLOR]


def test_long_labels_are_cut_on_the_tick_but_whole_in_the_hover() -> None:
    label = "word " * 30
    fig = plots.probability_bars([label], [1.0])
    assert fig.layout.yaxis.ticktext[0].endswith("…") and len(fig.layout.yaxis.ticktext[0]) == plots.MAX_LABEL_CHARS
    assert fig.data[0].customdata[0][0] == label


def test_bars_refuse_mismatched_input_and_draw_nothing_for_none() -> None:
    with pytest.raises(ValueError, match="2 labels but 1 scores"):
        plots.probability_bars(["a", "b"], [1.0])
    assert plots.probability_bars([], []).data == ()


def test_cls_attention_rows_are_layers_and_columns_tokens() -> None:
    tokens = ["[CLS]", "a", "[SEP]", "b", "[SEP]"]
    weights = [[0.1, 0.2, 0.3, 0.2, 0.2], [0.5, 0.1, 0.1, 0.1, 0.2]]
    fig = plots.cls_attention_figure(tokens, [0, 0, 0, 1, 1], weights)
    heat = fig.data[0]
    assert [list(r) for r in heat.z] == weights and list(heat.x) == [0, 1, 2, 3, 4] and list(heat.y) == [1, 2]
    assert list(fig.layout.xaxis.ticktext) == tokens
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(2.5, 3.5), (3.5, 4.5)]      # segment B marked
    assert list(heat.customdata[1][3]) == ["b", 2]                                    # token, layer (1-based)
    assert heat.colorbar.tickformat == ".0%" and "%{z:.3p}" in heat.hovertemplate   # percentages, bar and hover
    with pytest.raises(ValueError, match="one weight per token"):
        plots.cls_attention_figure(tokens, [0] * 5, [[1.0]])


def test_labels_and_tokens_are_written_as_entities() -> None:
    bars = plots.probability_bars(["1. a <s> b", "2. x & y"], [0.7, 0.3])
    assert list(bars.layout.yaxis.ticktext) == ["1. a &lt;s&gt; b", "2. x &amp; y"]
    assert [row[0] for row in bars.data[0].customdata] == ["1. a &lt;s&gt; b", "2. x &amp; y"]
    tokens = ["<s>", "Ġthe", "</s>", "</s>", "Ġcat", "</s>"]
    heat = plots.cls_attention_figure(tokens, [0] * 6, [[0.5, 0.1, 0.1, 0.1, 0.1, 0.1]])
    assert [cell[0] for cell in heat.data[0].customdata[0]] == [
        "&lt;s&gt;", "Ġthe", "&lt;/s&gt;", "&lt;/s&gt;", "Ġcat", "&lt;/s&gt;"]
    assert list(heat.layout.xaxis.ticktext) == [cell[0] for cell in heat.data[0].customdata[0]]   # not twice
    assert not any(tag in cell[0] for cell in heat.data[0].customdata[0] for tag in ("<s>", "</s>"))
