"""Plot builders: pure data -> plotly Figure, checked without a browser."""
from __future__ import annotations

import plotly.graph_objects as go
import pytest

from explorer import plots


def _cells(fig: go.Figure) -> list[tuple[int, str]]:
    """(position, trace name) for every cell in the figure, sorted by position."""
    return sorted((int(x), tr.name) for tr in fig.data for x in tr.x)


def test_repeated_tokens_stay_separate_positions() -> None:
    tokens = ["[CLS]", "the", "cat", "the", "[SEP]", "the", "[SEP]"]
    segments = ["special", "A", "A", "A", "special", "B", "special"]
    fig = plots.token_strip(tokens, segments)
    assert [p for p, _ in _cells(fig)] == list(range(len(tokens)))
    assert list(fig.layout.xaxis.tickvals) == list(range(len(tokens)))
    assert list(fig.layout.xaxis.ticktext) == tokens  # tick labels in order, repeats kept
    # x values are numbers (positions), never token strings that plotly would merge
    assert all(isinstance(x, int) for tr in fig.data for x in tr.x)


def test_cells_coloured_by_segment() -> None:
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
    segments = ["special", "A", "A", "special", "B", "special"]
    fig = plots.token_strip(tokens, segments, ids=[101, 1, 2, 102, 3, 102], type_ids=[0, 0, 0, 0, 1, 1])
    by_name = {tr.name: tr for tr in fig.data}
    assert by_name[plots.SEGMENT_NAMES["A"]].marker.color == plots.SEGMENT_COLORS["A"]
    assert by_name[plots.SEGMENT_NAMES["B"]].marker.color == plots.SEGMENT_COLORS["B"]
    assert by_name[plots.SEGMENT_NAMES["special"]].marker.color == plots.SEGMENT_COLORS["special"]
    assert list(by_name[plots.SEGMENT_NAMES["A"]].x) == [1, 2]
    assert list(by_name[plots.SEGMENT_NAMES["B"]].x) == [4]
    assert list(by_name[plots.SEGMENT_NAMES["special"]].x) == [0, 3, 5]
    # hover data carries token, id and type id of each cell
    assert [list(c) for c in by_name[plots.SEGMENT_NAMES["B"]].customdata] == [["c", 3, 1]]
    assert len({plots.SEGMENT_COLORS[s] for s in ("A", "B", "special")}) == 3


def test_number_of_cells_matches_tokens_and_single_segment() -> None:
    tokens = ["[CLS]"] + [f"w{i}" for i in range(10)] + ["[SEP]"]
    segments = ["special"] + ["A"] * 10 + ["special"]
    fig = plots.token_strip(tokens, segments)
    assert sum(len(tr.x) for tr in fig.data) == len(tokens)
    assert {tr.name for tr in fig.data} == {plots.SEGMENT_NAMES["A"], plots.SEGMENT_NAMES["special"]}
    assert fig.layout.xaxis.range == (-0.5, len(tokens) - 0.5)


def test_long_sequences_keep_every_cell_but_thin_labels() -> None:
    n = 512
    tokens = ["x"] * n
    fig = plots.token_strip(tokens, ["A"] * n)
    assert sum(len(tr.x) for tr in fig.data) == n
    assert len(fig.layout.xaxis.tickvals) <= 96
    assert fig.data[0].text is None  # no in-cell numbers when cells are too thin


def test_empty_input_gives_valid_empty_figure() -> None:
    fig = plots.token_strip([], [])
    assert isinstance(fig, go.Figure)
    assert len(fig.data) == 0
    assert fig.layout.annotations and "No tokens" in fig.layout.annotations[0].text
    fig.to_json()  # serialisable, as gr.Plot needs


def test_figure_serialises_to_json() -> None:
    fig = plots.token_strip(["[CLS]", "hi", "[SEP]"], ["special", "A", "special"], ids=[101, 7632, 102])
    assert '"hi"' in fig.to_json()


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError):
        plots.token_strip(["a", "b"], ["A"])
    with pytest.raises(ValueError):
        plots.token_strip(["a"], ["A"], ids=[1, 2])


def test_subplot_grid_lays_plots_out_like_make_subplots() -> None:
    from plotly.subplots import make_subplots

    from explorer.plots import axis_names, figure, subplot_grid

    ours = subplot_grid(2, 3, ["a", "b", "c", "d"], horizontal_spacing=0.1, vertical_spacing=0.2,
                        y5=dict(title=dict(text="p")))
    theirs = make_subplots(rows=2, cols=3, subplot_titles=["a", "b", "c", "d"], horizontal_spacing=0.1,
                           vertical_spacing=0.2).layout
    for i in range(6):
        x, y = axis_names(i)
        for mine, reference in ((ours[x.replace("x", "xaxis")], theirs[x.replace("x", "xaxis")]),
                                (ours[y.replace("y", "yaxis")], theirs[y.replace("y", "yaxis")])):
            assert mine["domain"] == pytest.approx(list(reference.domain))
    assert [a["text"] for a in ours["annotations"]] == ["a", "b", "c", "d"]
    assert [a["x"] for a in ours["annotations"]] == pytest.approx([a.x for a in theirs.annotations])
    assert ours["yaxis5"]["title"]["text"] == "p" and ours["yaxis5"]["anchor"] == "x5"
    fig = figure([dict(type="bar", x=[0], y=[1], xaxis="x5", yaxis="y5")], height=300, **ours)
    assert fig.data[0].xaxis == "x5" and fig.layout.height == 300 and fig.layout.yaxis5.title.text == "p"
