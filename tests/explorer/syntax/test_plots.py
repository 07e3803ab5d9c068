"""The Syntax tab's figures: what each cell, line and label holds, numbered as the app numbers layers."""
from __future__ import annotations

import numpy as np

from explorer.syntax import plots


def test_head_names_number_layers_from_1_and_heads_from_0() -> None:
    assert plots.head_names(2, 3) == ["1-0", "1-1", "1-2", "2-0", "2-1", "2-2"]


def test_relations_overview_is_one_row_per_relation_one_column_per_head() -> None:
    accuracy = np.arange(2 * 2 * 3).reshape(2, 2, 3) / 12                          # (R, L, nh)
    fig = plots.relations_overview(accuracy, ["det", "obj"], [40, 12], [0.5, 0.25], "dependent → head")
    heat = fig.data[0]
    assert list(heat.y) == ["det (40, baseline 50%)", "obj (12, baseline 25%)"]
    assert list(heat.x) == plots.head_names(2, 3)
    np.testing.assert_allclose(np.array(heat.z), accuracy.reshape(2, 6))
    np.testing.assert_allclose(np.array(heat.customdata), accuracy.reshape(2, 6) - [[0.5], [0.25]])
    assert "dependent → head" in fig.layout.title.text and (heat.zmin, heat.zmax) == (0, 1)
    assert "No relation" in plots.relations_overview(np.zeros((0, 2, 3)), [], [], [], "x").layout.annotations[0].text


def test_relation_heatmap_is_layers_by_heads_with_the_baseline_in_the_title() -> None:
    grid = np.array([[0.1, 0.9], [0.5, 0.3]])
    fig = plots.relation_heatmap(grid, "det", 0.4, 1, "dependent → head")
    heat = fig.data[0]
    assert list(heat.y) == ["1", "2"] and list(heat.x) == ["0", "1"]
    assert heat.customdata[0][1] == "beats the baseline" and heat.customdata[0][0] == "does not beat the baseline"
    assert heat.text[0][1] == "90%"
    assert "(+1 words) gets 40%" in fig.layout.title.text and fig.layout.yaxis.title.text == "layer (from 1)"


def test_probe_figure_draws_accuracy_control_selectivity_and_the_majority_line() -> None:
    fig = plots.probe_figure([0, 1, 2], [0.8, 0.9, 0.95], [0.7, 0.6, 0.5], 0.75)
    names = [t.name for t in fig.data]
    assert names == ["UPOS accuracy", "control task accuracy", "selectivity (accuracy − control)",
                     "each word's most frequent tag"]
    np.testing.assert_allclose(fig.data[2].y, [0.1, 0.3, 0.45])
    assert list(fig.data[3].y) == [0.75, 0.75] and list(fig.data[0].x) == [0, 1, 2]
    assert "0 = the embeddings' output" in fig.layout.xaxis.title.text


def test_over_training_figure_has_a_line_and_a_baseline_per_relation_and_a_line_per_layer() -> None:
    best = np.array([[0.2, 0.1], [0.6, 0.4]])                                        # (C, R)
    selectivity = np.array([[0.0, 0.1, 0.2], [0.1, 0.3, 0.2]])                       # (C, L + 1)
    fig = plots.over_training_figure([100, 200], ["step 100", "step 200"], ["det", "obj"], best, [0.5, 0.3],
                                     selectivity)
    lines = {t.name: t for t in fig.data}
    assert list(lines["det: best head"].y) == [0.2, 0.6] and list(lines["det: best head"].x) == [100, 200]
    assert list(lines["obj: baseline"].y) == [0.3, 0.3] and lines["obj: baseline"].line.dash == "dot"
    assert list(lines["selectivity, layer 1"].y) == [0.1, 0.3] and lines["selectivity, layer 1"].xaxis == "x2"
    assert len(fig.data) == 2 * 2 + 3
    assert "No checkpoints" in plots.over_training_figure([], [], [], np.zeros((0, 0)), [], np.zeros((0, 0))) \
        .layout.annotations[0].text
