"""The Syntax tab's figures: what each cell, line and label holds, numbered as the app numbers layers."""
from __future__ import annotations

import numpy as np

from explorer.syntax import plots


def test_head_names_number_layers_from_1_and_heads_from_0() -> None:
    assert plots.head_names(2, 3) == ["1-0", "1-1", "1-2", "2-0", "2-1", "2-2"]


def plot_width_per_column(fig, columns: int) -> float:
    """The px each of ``columns`` gets: the figure's own width less its left and right margins."""
    return (fig.layout.width - fig.layout.margin.l - fig.layout.margin.r) / columns


def text_px(text: str, size: float) -> float:
    """A generous width of ``text`` in a sans-serif font of ``size`` px (digits and % are under 0.6 em wide)."""
    return len(text) * 0.6 * size


def test_relations_overview_is_one_row_per_relation_one_column_per_head() -> None:
    accuracy = np.arange(2 * 2 * 3).reshape(2, 2, 3) / 12                          # (R, L, nh)
    fig = plots.relations_overview(accuracy, ["det", "obj"], [40, 12], [0.5, 0.25], "dependent → head")
    heat = fig.data[0]
    assert list(heat.y) == ["det", "obj"]                                          # short names: the grid keeps its room
    assert list(heat.x) == plots.head_names(2, 3)
    np.testing.assert_allclose(np.array(heat.z), accuracy.reshape(2, 6))
    custom = np.array(heat.customdata, dtype=float)                                 # (R, L * nh, 3)
    np.testing.assert_allclose(custom[..., 0], accuracy.reshape(2, 6) - [[0.5], [0.25]])
    assert custom[0, :, 1].tolist() == [40] * 6 and custom[1, :, 2].tolist() == [0.25] * 6
    assert "arcs, baseline" in heat.hovertemplate and "minus baseline" in heat.hovertemplate
    assert "dependent → head" in fig.layout.title.text and (heat.zmin, heat.zmax) == (0, 1)
    assert "No relation" in plots.relations_overview(np.zeros((0, 2, 3)), [], [], [], "x").layout.annotations[0].text


def test_the_overview_gives_every_head_room_for_its_upright_label() -> None:
    """72 heads (6 x 12) at a phone's width: each column keeps ``OVERVIEW_CELL_PX``, so the figure is wider than the
    screen (its block scrolls) and no two upright tick labels touch."""
    fig = plots.relations_overview(np.zeros((3, 6, 12)), ["det", "obj", "compound"], [10] * 3, [0.1] * 3, "x")
    per_head = plot_width_per_column(fig, 72)
    assert per_head >= plots.OVERVIEW_CELL_PX and fig.layout.width > 390
    assert fig.layout.xaxis.tickangle == -90 and 1.3 * fig.layout.xaxis.tickfont.size < per_head   # a line's height
    assert fig.layout.height >= 3 * plots.OVERVIEW_ROW_PX


def test_relation_heatmap_is_layers_by_heads_with_the_baseline_in_the_title() -> None:
    grid = np.array([[0.1, 0.9], [0.5, 0.3]])
    fig = plots.relation_heatmap(grid, "det", 0.4, 1, "dependent → head")
    heat = fig.data[0]
    assert list(heat.y) == ["1", "2"] and list(heat.x) == ["0", "1"]
    assert heat.customdata[0][1] == "beats the baseline" and heat.customdata[0][0] == "does not beat the baseline"
    assert heat.text[0][1] == "90%"
    assert "(+1 words) gets 40%" in fig.layout.title.text and fig.layout.yaxis.title.text == "layer (from 1)"


def test_each_printed_percentage_fits_its_cell() -> None:
    """Twelve heads: each cell is ``CELL_PX`` wide and "100%" in the cells' type fits inside it, whatever the
    screen; the title is two short lines."""
    fig = plots.relation_heatmap(np.ones((6, 12)), "compound", 0.72, -1, "head → dependent")
    heat = fig.data[0]
    per_head = plot_width_per_column(fig, 12)
    assert per_head >= plots.CELL_PX > text_px("100%", heat.textfont.size)
    assert heat.text[0][0] == "100%"
    assert [len(line) < 50 for line in fig.layout.title.text.split("<br>")] == [True, True]


def test_probe_figure_draws_accuracy_control_selectivity_and_the_majority_line() -> None:
    fig = plots.probe_figure([0, 1, 2], [0.8, 0.9, 0.95], [0.7, 0.6, 0.5], 0.75)
    names = [t.name for t in fig.data]
    assert names == ["UPOS accuracy", "control task accuracy", "selectivity (accuracy − control)",
                     "each word's most frequent tag"]
    np.testing.assert_allclose(fig.data[2].y, [0.1, 0.3, 0.45])
    assert list(fig.data[3].y) == [0.75, 0.75] and list(fig.data[0].x) == [0, 1, 2]
    assert "0 = the embeddings' output" in fig.layout.xaxis.title.text
    legend = fig.layout.legend                       # below the axis title, wrapping at a phone's width
    assert (legend.orientation, legend.yref, legend.y, legend.yanchor) == ("h", "container", 0, "bottom")


def test_over_training_figure_has_a_line_and_a_baseline_per_relation_and_a_line_per_layer() -> None:
    best = np.array([[0.2, 0.1], [0.6, 0.4]])                                        # (C, R)
    selectivity = np.array([[0.0, 0.1, 0.2], [0.1, 0.3, 0.2]])                       # (C, L + 1)
    fig = plots.over_training_figure([100, 200], ["step 100", "step 200"], ["det", "obj"], best, [0.5, 0.3],
                                     selectivity)
    lines = {t.name: t for t in fig.data}
    assert list(lines["det"].y) == [0.2, 0.6] and list(lines["det"].x) == [100, 200]
    assert list(lines["obj: baseline"].y) == [0.3, 0.3] and lines["obj: baseline"].line.dash == "dot"
    assert not lines["obj: baseline"].showlegend and lines["obj: baseline"].legendgroup == "obj"
    assert list(lines["layer 1"].y) == [0.1, 0.3] and lines["layer 1"].xaxis == "x2"
    assert len(fig.data) == 2 * 2 + 3
    layout = fig.layout                             # one panel above the other, each axis titled
    assert layout.yaxis.domain[0] > layout.yaxis2.domain[1] and list(layout.xaxis.domain) == [0, 1]
    assert (layout.xaxis.title.text, layout.xaxis2.title.text) == ("step", "step")
    assert layout.yaxis.title.text == "accuracy" and layout.yaxis.tickformat == ".0%"
    assert layout.yaxis2.title.text == "selectivity" and layout.legend.yref == "container"
    assert "No checkpoints" in plots.over_training_figure([], [], [], np.zeros((0, 0)), [], np.zeros((0, 0))) \
        .layout.annotations[0].text
