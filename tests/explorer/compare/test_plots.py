"""Compare tab figures (explorer/compare/plots.py): pure builders, checked on their data without a browser."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.compare import plots


def test_similarity_lines_name_what_they_run_over_and_hide_the_plain_estimator() -> None:
    lines = [plots.Line("debiased CKA, sentence set (1,052 tokens of 80 sentences)", [1.0, 0.4, 0.3], "set"),
             plots.Line("debiased CKA, this input (8 tokens)", [1.0, -0.2, 0.1], "input"),
             plots.Line("plain CKA, this input (8 tokens)", [1.0, 0.9, 0.95], "plain"),
             plots.Line("mean token cosine, this input", [1.0, 0.8, float("nan")], "cosine")]
    fig = plots.similarity_figure(lines, "A", "B", note="debiased linear CKA over 1,052 tokens · ⚠ few")
    over_set, one_input, plain, cosine = fig.data
    assert list(over_set.x) == ["layer 0 (embeddings)", "layer 1", "layer 2"] and list(over_set.y) == [1.0, 0.4, 0.3]
    assert "1,052 tokens" in over_set.name and "8 tokens" in one_input.name and "8 tokens" in plain.name
    assert plain.visible == "legendonly" and over_set.visible is True and over_set.line.width > one_input.line.width
    assert list(cosine.y) == [1.0, 0.8, None]                                     # not a number: a gap
    assert fig.layout.yaxis.range[0] == pytest.approx(-0.25)                       # room for a negative estimate
    assert "layer 0 = the embeddings' output" in fig.layout.xaxis.title.text
    assert "<sup>debiased linear CKA over 1,052 tokens · ⚠ few</sup>" in fig.layout.title.text
    assert not plots.similarity_figure([], "A", "B").data                          # empty: a message, no trace


def test_cka_heatmap_rows_are_a_and_columns_b() -> None:
    cka = np.array([[1.0, 0.5, 0.2], [0.4, 0.9, 0.3]])
    figure = plots.cka_heatmap(cka, "A", "B", over="1,052 tokens of 80 sentences")
    [trace] = figure.data
    assert "Debiased linear CKA of every layer pair over 1,052 tokens of 80 sentences" in figure.layout.title.text
    assert list(trace.y) == ["layer 0 (embeddings)", "layer 1"]
    assert list(trace.x) == ["layer 0 (embeddings)", "layer 1", "layer 2"]
    np.testing.assert_allclose(np.asarray(trace.z), cka)


def test_attention_pair_shows_both_maps_and_a_centred_difference() -> None:
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    b = np.array([[0.25, 0.75], [0.5, 0.5]])
    fig = plots.attention_pair_figure(a, b, b - a, ["[CLS]", "hi"], 1, 2, "A", "B")
    first, second, difference = fig.data
    np.testing.assert_allclose(np.asarray(first.z), a)
    np.testing.assert_allclose(np.asarray(second.z), b)
    assert difference.zmid == 0.0 and difference.zmin == -0.75 and difference.zmax == 0.75
    same = plots.attention_pair_figure(a, a, a - a, ["[CLS]", "hi"], 1, 2, "A", "A")
    assert same.data[2].zmax == 0.01 and same.data[2].colorbar.exponentformat == "none"    # never "1μ" on the bar
    assert same.data[2].colorbar.tickformat == ".3~f"                                      # nor 5e-7: ±0.01, decimals
    assert (first.xaxis, second.xaxis, difference.xaxis) == ("x", "x2", "x3")
    assert [a.text for a in fig.layout.annotations] == ["A: A", "B: B", "B − A"]
    assert "Layer 1, head 2" in fig.layout.title.text


def test_similarity_line_over_layer_pairs() -> None:
    """Two depths: the points are layer pairs at the same relative depth."""
    pairs = ["A layer 0 · B layer 0", "A layer 1 · B layer 2"]
    fig = plots.similarity_figure([plots.Line("debiased CKA, this input (9 words)", [1.0, 0.4], "input")], "A", "B",
                                  names=pairs)
    assert list(fig.data[0].x) == pairs and "same relative depth" in fig.layout.xaxis.title.text
