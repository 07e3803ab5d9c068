"""Pure QA figure builders: start/end probabilities per window, windows over the context."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from explorer.qa import plots as qp  # noqa: E402


def _is_empty(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and len(fig.layout.annotations) == 1


def _window(index: int, tokens: list[str], answers=()) -> qp.WindowProbs:
    n = len(tokens)
    return qp.WindowProbs(index, tokens, [1 / n] * n, [i / n for i in range(n)],
                          [(3 * i, 3 * i + 2) for i in range(n)], list(answers))


def test_one_window_start_and_end_by_position() -> None:
    w = _window(0, ["the", "cat", "sat", "the", "mat"], answers=[(1, 2, "#1 · 0.4"), (3, 4, "#2 · 0.1")])
    fig = qp.probabilities_figure([w], title="t")
    assert [t.name for t in fig.data] == ["p(start)", "p(end)"]
    start, end = fig.data
    assert list(start.x) == [0, 1, 2, 3, 4] and list(start.y) == w.start_probs and list(end.y) == w.end_probs
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3, 4]
    assert list(fig.layout.xaxis.ticktext) == ["the", "cat", "sat", "the", "mat"]   # two "the"s stay apart
    assert start.customdata[4][1] == "12–14"                                        # characters in the hover
    shapes = [(s.x0, s.x1) for s in fig.layout.shapes]
    assert shapes == [(0.5, 2.5), (2.5, 4.5)]                                       # answer spans shaded
    assert "#1 · 0.4" in [a.text for a in fig.layout.annotations]                   # the best one labelled
    fig.to_json()


def test_several_windows_give_several_subplots() -> None:
    fig = qp.probabilities_figure([_window(0, ["a", "b"]), _window(2, ["c", "d", "e"])])
    assert len(fig.data) == 4
    assert {t.xaxis for t in fig.data[:2]} == {"x"} and {t.xaxis for t in fig.data[2:]} == {"x2"}
    assert [t.showlegend for t in fig.data] == [True, True, False, False]          # one legend entry each
    assert [fig.layout.yaxis.title.text, fig.layout.yaxis2.title.text] == ["window 1 · probability",
                                                                           "window 3 · probability"]
    assert not fig.layout.annotations                                               # no titles over the plots
    assert list(fig.layout.xaxis2.ticktext) == ["c", "d", "e"]


def test_long_windows_thin_their_tick_labels() -> None:
    fig = qp.probabilities_figure([_window(0, [f"w{i}" for i in range(300)])])
    assert len(fig.data[0].x) == 300
    assert len(fig.layout.xaxis.tickvals) <= 100 and fig.layout.xaxis.ticktext[1] == f"w{fig.layout.xaxis.tickvals[1]}"


def test_probabilities_validation_and_empty() -> None:
    assert _is_empty(qp.probabilities_figure([]))
    with pytest.raises(ValueError, match="window 0: 2 tokens"):
        qp.probabilities_figure([qp.WindowProbs(0, ["a", "b"], [0.5], [0.5, 0.5])])
    with pytest.raises(ValueError, match="offsets"):
        qp.probabilities_figure([qp.WindowProbs(0, ["a"], [1.0], [1.0], [(0, 1), (1, 2)])])


def test_windows_figure_character_ranges_and_answers() -> None:
    fig = qp.windows_figure(100, [(0, 60), (40, 100)], answers=[(45, 50, "#1 · 0.9"), (10, 12, "#2 · 0.1")],
                            title="2 windows")
    bar = fig.data[0]
    assert list(bar.base) == [0, 40] and list(bar.x) == [60, 60] and bar.orientation == "h"
    assert list(fig.layout.yaxis.ticktext) == ["window 1", "window 2"]
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(45, 50), (10, 12)]
    assert "#1 · 0.9" in [a.text for a in fig.layout.annotations]
    assert list(fig.layout.xaxis.range) == [0, 100]
    fig.to_json()


def test_windows_figure_empty_and_validation() -> None:
    assert _is_empty(qp.windows_figure(10, []))
    with pytest.raises(ValueError, match="context_length"):
        qp.windows_figure(-1, [(0, 1)])


def test_every_window_shares_one_probability_scale_from_0() -> None:
    low = qp.WindowProbs(0, ["a", "b"], [0.01, 0.02], [0.03, 0.04])
    high = qp.WindowProbs(1, ["c", "d"], [0.9, 0.05], [0.1, 0.6])
    fig = qp.probabilities_figure([low, high])
    assert list(fig.layout.yaxis.range) == list(fig.layout.yaxis2.range) == [0.0, 0.9]   # not [0, 0.04] for window 1
    assert fig.layout.yaxis.tickformat == fig.layout.yaxis2.tickformat == ".0%"
    tiny = qp.probabilities_figure([qp.WindowProbs(0, ["a"], [0.000182], [0.0001])])
    assert tiny.layout.yaxis.tickformat == ".3%"                                          # no "20μ" ticks


def test_windows_figure_marks_every_place_of_the_best_answer() -> None:
    fig = qp.windows_figure(100, [(0, 60), (40, 100)],
                            answers=[(10, 13, "#1 · 99%"), (70, 73, "#1 · 99%"), (20, 22, "#2 · 1%")])
    assert [s.fillcolor for s in fig.layout.shapes] == [qp.BEST_COLOR, qp.BEST_COLOR, qp.ANSWER_COLOR]
    assert [(a.text, a.x) for a in fig.layout.annotations] == [("#1 · 99%", 10), ("#1 · 99%", 70)]


def test_the_best_answer_label_has_the_strip_above_its_plot_to_itself() -> None:
    """"#1 · 66.3%window 1" ran together: the answer label and the window's title shared the strip above a plot.
    Now the window is named on its y axis, the legend stands right of the plots, and the strip holds the label."""
    windows = [_window(0, ["the", "cat", "sat", "on", "mat"], answers=[(2, 2, "#1 · 66.3%")]),
               _window(1, ["sat", "on", "the", "mat", "."], answers=[(0, 0, "#1 · 66.3%")])]
    fig = qp.probabilities_figure(windows, title="Start and end probabilities over the context tokens")
    above = [a for a in fig.layout.annotations if a.yanchor == "bottom"]
    assert [a.text for a in above] == ["#1 · 66.3%", "#1 · 66.3%"]              # only the answers' labels
    assert {a.yref for a in above} == {"y domain", "y2 domain"}                  # one per plot
    assert not any("window" in a.text for a in fig.layout.annotations)
    assert fig.layout.yaxis.title.text == "window 1 · probability"
    assert fig.layout.legend.x >= 1 and fig.layout.legend.orientation == "v"     # beside the plots, not above
    assert fig.layout.margin.t >= 70                                              # the figure title has its own room


def test_window_hover_writes_roberta_tokens_as_entities() -> None:
    fig = qp.probabilities_figure([_window(0, ["Ġthe", "</s>", "Ġa<b>", "</s>"])])
    for trace in fig.data:
        assert [row[0] for row in trace.customdata] == ["Ġthe", "&lt;/s&gt;", "Ġa&lt;b&gt;", "&lt;/s&gt;"]
        assert not any("<" in row[0] for row in trace.customdata)
    assert list(fig.layout.xaxis.ticktext) == ["Ġthe", "&lt;/s&gt;", "Ġa&lt;b&gt;", "&lt;/s&gt;"]
