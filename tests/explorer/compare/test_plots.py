"""Compare tab figures (explorer/compare/plots.py): pure builders, checked on their data without a browser."""
from __future__ import annotations

import numpy as np

from explorer.compare import plots


def test_similarity_line_has_a_point_per_layer_and_the_cosine_when_given() -> None:
    fig = plots.similarity_figure([1.0, 0.9, 0.5], [1.0, 0.8, 0.2], "A", "B")
    cka, cosine = fig.data
    assert list(cka.x) == ["layer 0 (embeddings)", "layer 1", "layer 2"] and list(cka.y) == [1.0, 0.9, 0.5]
    assert "layer 0 = the embeddings' output" in fig.layout.xaxis.title.text
    assert cosine.name == "mean token cosine" and list(cosine.y) == [1.0, 0.8, 0.2]
    assert len(plots.similarity_figure([1.0, 0.5], None, "A", "B").data) == 1
    assert not plots.similarity_figure([], None, "A", "B").data                  # empty: a message, no trace


def test_cka_heatmap_rows_are_a_and_columns_b() -> None:
    cka = np.array([[1.0, 0.5, 0.2], [0.4, 0.9, 0.3]])
    [trace] = plots.cka_heatmap(cka, "A", "B").data
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


def test_similarity_line_over_layer_pairs_and_word_cosine() -> None:
    """Two depths: the points are layer pairs at the same relative depth; aligned by words: a word cosine."""
    pairs = ["A layer 0 · B layer 0", "A layer 1 · B layer 2"]
    [cka] = plots.similarity_figure([1.0, 0.4], None, "A", "B", names=pairs).data
    fig = plots.similarity_figure([1.0, 0.4], None, "A", "B", names=pairs)
    assert list(cka.x) == pairs and "same relative depth" in fig.layout.xaxis.title.text
    words = plots.similarity_figure([1.0, 0.4], [0.9, 0.3], "A", "B", unit="word")
    assert words.data[1].name == "mean word cosine" and list(words.data[0].x) == ["layer 0 (embeddings)", "layer 1"]
