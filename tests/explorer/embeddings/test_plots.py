"""explorer.embeddings.plots: pure builders, checked without a browser."""
from __future__ import annotations

import numpy as np

from explorer.formatting import sig
from explorer.plots import SEGMENT_COLORS
import plotly.graph_objects as go
import pytest

from explorer.embeddings import plots as ep

TOKENS = ["[CLS]", "the", "dog", "saw", "the", "dog", "[SEP]"]
SEGMENTS = ["special", "A", "A", "A", "A", "A", "special"]
RNG = np.random.default_rng(0)


def _annotation(fig: go.Figure) -> str:
    return " ".join(a.text for a in fig.layout.annotations)


def test_component_norms_groups_bars_by_position() -> None:
    norms = {name: RNG.random(len(TOKENS)) for name in ("word", "position", "segment", "sum", "output")}
    fig = ep.component_norms(TOKENS, norms)
    assert fig.layout.barmode == "group"
    assert [t.name for t in fig.data] == [ep.COMPONENT_LABELS[n] for n in norms]
    for trace, values in zip(fig.data, norms.values()):
        assert list(trace.x) == list(range(len(TOKENS)))             # repeated tokens keep their own bars
        np.testing.assert_allclose(trace.y, values)
    assert list(fig.layout.xaxis.ticktext) == TOKENS and list(fig.layout.xaxis.tickvals) == list(range(7))
    with pytest.raises(ValueError, match="norms"):
        ep.component_norms(TOKENS, {"word": [1.0, 2.0]})
    assert "No tokens" in _annotation(ep.component_norms([], {}))


def test_dimensions_heatmap_rows_are_tokens() -> None:
    values = RNG.normal(size=(len(TOKENS), 12))
    fig = ep.dimensions_heatmap(TOKENS, values, "position")
    heat = fig.data[0]
    assert isinstance(heat, go.Heatmap) and np.asarray(heat.z).shape == (7, 12)
    assert heat.zmin == -heat.zmax == -np.quantile(np.abs(values), 0.99)   # centred at zero, outliers saturate
    assert list(heat.y) == [f"{i}: {t}" for i, t in enumerate(TOKENS)]     # repeated tokens keep their rows
    assert len(set(heat.y)) == len(TOKENS) and fig.layout.yaxis.autorange == "reversed"
    assert "position" in fig.layout.title.text
    with pytest.raises(ValueError):
        ep.dimensions_heatmap(TOKENS, values[:3], "word")


def test_position_similarity_heatmap() -> None:
    sims = np.corrcoef(RNG.normal(size=(10, 20)))
    fig = ep.position_similarity_heatmap(sims)
    assert np.asarray(fig.data[0].z).shape == (10, 10) and (fig.data[0].zmin, fig.data[0].zmax) == (-1, 1)
    assert "10 position" in fig.layout.title.text
    with pytest.raises(ValueError, match="square"):
        ep.position_similarity_heatmap(np.ones((3, 4)))


def test_position_pca_scatter_coloured_by_index() -> None:
    coords = RNG.normal(size=(40, 2))
    fig = ep.position_pca_scatter(coords, [0.5, 0.2])
    line, points = fig.data
    assert line.mode == "lines" and list(points.marker.color) == list(range(40))
    assert points.text[0] == "0" and points.text[-1] == "39" and "" in points.text   # thinned labels
    assert "50%" in fig.layout.xaxis.title.text and "20%" in fig.layout.yaxis.title.text
    with pytest.raises(ValueError):
        ep.position_pca_scatter(np.ones((4, 3)))


def test_contextual_pca_scatter_by_segment() -> None:
    segments = ["special", "A", "A", "special", "B", "B", "special"]
    coords = RNG.normal(size=(7, 2))
    fig = ep.contextual_pca_scatter(TOKENS, segments, coords, layer=2, variance=[0.4, 0.3])
    assert [t.name for t in fig.data] == ["Segment A (type 0)", "Segment B (type 1)", "Special token"]
    b = fig.data[1]
    assert list(b.customdata) == [4, 5] and list(b.text) == ["the", "dog"]
    np.testing.assert_allclose(b.x, coords[[4, 5], 0])
    assert "layer 2" in fig.layout.title.text
    assert "embedding output" in ep.contextual_pca_scatter(TOKENS, segments, coords, layer=0).layout.title.text
    with pytest.raises(ValueError):
        ep.contextual_pca_scatter(TOKENS, segments[:3], coords, layer=0)


def test_segment_difference_bars() -> None:
    diff = np.array([0.5, -0.25, 0.0, 1.0])
    fig = ep.segment_difference_bars(diff, norm=1.15, cosine=0.3)
    np.testing.assert_allclose(fig.data[0].y, diff)
    marker = fig.data[0].marker                                  # B-leaning bars in B's colour, A-leaning in A's
    assert list(marker.color) == [1, 0, 1, 1] and marker.colorscale[0][1] == SEGMENT_COLORS["A"]
    assert marker.colorscale[-1][1] == SEGMENT_COLORS["B"]
    assert "1.150" in fig.layout.title.text and "0.300" in fig.layout.title.text
    assert "single segment" in _annotation(ep.segment_difference_bars(None))


def test_neighbours_table() -> None:
    tokens = ["[CLS]", "cat", "[SEP]"]
    pieces = [["a", "b"], ["dog", "cats"], ["x", "y"]]
    ids = [[1, 2], [10, 11], [3, 4]]
    scores = [[0.9, 0.8], [0.7, 0.654321], [0.5, 0.4]]
    every = ep.neighbours_table(tokens, pieces, ids, scores)
    assert list(every.columns) == ep.NEIGHBOUR_COLUMNS and len(every) == 6
    one = ep.neighbours_table(tokens, pieces, ids, scores, position=1)
    assert one["neighbour"].tolist() == ["dog", "cats"] and one["rank"].tolist() == [1, 2]
    assert one["cosine"].tolist() == [0.7, 0.6543] and set(one["token"]) == {"cat"}
    with pytest.raises(ValueError, match="position 3"):
        ep.neighbours_table(tokens, pieces, ids, scores, position=3)
    with pytest.raises(ValueError):
        ep.neighbours_table(tokens, pieces[:2], ids, scores)


def test_position_similarity_grid_small_multiples() -> None:
    panels = [(f"step {s}", np.corrcoef(RNG.normal(size=(8, 16)))) for s in (0, 100, 200, 300)]
    fig = ep.position_similarity_grid(panels, columns=3)
    assert len(fig.data) == 4 and all(t.coloraxis == "coloraxis" for t in fig.data)
    assert [a.text for a in fig.layout.annotations] == [t for t, _ in panels]
    assert fig.layout.coloraxis.cmin == -1 and fig.layout.coloraxis.cmax == 1
    assert {t.xaxis for t in fig.data} == {"x", "x2", "x3", "x4"}     # 2 rows x 3 columns
    assert "No checkpoints" in _annotation(ep.position_similarity_grid([]))
    with pytest.raises(ValueError, match="square"):
        ep.position_similarity_grid([("bad", np.ones((2, 3)))])


def _circle(num: int = 40) -> np.ndarray:
    angle = np.linspace(0, 2 * np.pi, num, endpoint=False)
    return np.column_stack([np.cos(angle), np.sin(angle)])


def test_position_pca_outlier_does_not_squeeze_the_rest() -> None:
    coords = _circle()
    coords[0] = [100.0, 0.0]                                   # position 0 far to the right
    fig = ep.position_pca_scatter(coords, [0.6, 0.2])
    x_lo, x_hi = fig.layout.xaxis.range
    y_lo, y_hi = fig.layout.yaxis.range
    bulk = coords[1:]
    assert (bulk[:, 0].max() - bulk[:, 0].min()) / (x_hi - x_lo) > 0.8     # the others span most of the plot
    assert (bulk[:, 1].max() - bulk[:, 1].min()) / (y_hi - y_lo) > 0.8
    line, points = fig.data
    assert points.x[0] == pytest.approx(x_hi) and points.y[0] == pytest.approx(0.0)   # drawn on the right edge
    assert points.marker.symbol[0] == "diamond-open" and set(points.marker.symbol[1:]) == {"circle"}
    np.testing.assert_allclose(points.x[1:], bulk[:, 0]) and np.testing.assert_allclose(line.x, points.x)
    (note,) = fig.layout.annotations
    assert note.text == "position 0, off scale →" and note.x == pytest.approx(x_hi)
    assert points.hovertext[0].startswith("position 0<br>(100, 0)")            # the true coordinates
    assert points.hovertext[1] == f"position 1<br>({sig(coords[1, 0])}, {sig(coords[1, 1])})"


def test_position_pca_without_outliers_shows_every_point_as_is() -> None:
    coords = _circle() * 3
    fig = ep.position_pca_scatter(coords)
    points = fig.data[1]
    np.testing.assert_allclose(points.x, coords[:, 0]) and np.testing.assert_allclose(points.y, coords[:, 1])
    assert not fig.layout.annotations and set(points.marker.symbol) == {"circle"}
    x_lo, x_hi = fig.layout.xaxis.range
    assert x_lo < -3 < 3 < x_hi and (x_hi - x_lo) < 7                        # the data's range plus a margin
    many = _circle()
    many[:6] *= 200                                            # several outliers: named up to a limit, then counted
    notes = [a.text for a in ep.position_pca_scatter(many).layout.annotations]
    assert len(notes) == ep.MAX_OFF_SCALE_NOTES + 1 and "6 positions off scale" in notes[-1]
    assert ep.robust_range(np.full(5, 2.0))[0] < 2.0 < ep.robust_range(np.full(5, 2.0))[1]   # one value: a range


def test_token_figures_write_roberta_tokens_as_entities() -> None:
    tokens, shown = ["<s>", "Ġthe", "<mask>", "</s>"], ["&lt;s&gt;", "Ġthe", "&lt;mask&gt;", "&lt;/s&gt;"]
    norms = ep.component_norms(tokens, {"word": [1.0, 2.0, 3.0, 4.0]})
    assert list(norms.data[0].customdata) == shown and list(norms.layout.xaxis.ticktext) == shown   # not twice
    dims = ep.dimensions_heatmap(tokens, RNG.random((4, 3)))
    assert list(dims.data[0].y) == [f"{i}: {t}" for i, t in enumerate(shown)]
    pca = ep.contextual_pca_scatter(tokens, ["special", "A", "A", "special"], RNG.random((4, 2)), layer=1)
    assert sorted(t for trace in pca.data for t in trace.text) == sorted(shown)
    texts = [*norms.data[0].customdata, *dims.data[0].y, *(t for trace in pca.data for t in trace.text)]
    assert not any(tag in text for text in texts for tag in ("<s>", "</s>", "<mask>"))
