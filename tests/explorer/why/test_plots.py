"""Why tab figures and coloured tokens: pure builders, checked without a browser."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest

from explorer.formatting import sig
from explorer.why import plots, token_html

TOKENS = ["[CLS]", "the", "cat", "the", "[MASK]", "[SEP]"]
VALUES = [0.0, 0.5, -2.0, 0.5, 0.1, -0.25]


def test_bars_are_the_largest_by_size_by_position_signed_colours() -> None:
    fig = plots.top_tokens_figure(TOKENS, VALUES, k=4, x_title="attribution to the logit")
    bar = fig.data[0]
    assert list(bar.x) == [-2.0, 0.5, 0.5, -0.25]                      # by size; equal sizes: the earlier first
    assert list(fig.layout.yaxis.ticktext) == ["2: cat", "1: the", "3: the", "5: [SEP]"]   # two "the"s stay two
    assert list(bar.marker.color) == [plots.DOWN, plots.UP, plots.UP, plots.DOWN]
    assert list(bar.text) == [sig(v) for v in bar.x]
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.xaxis.title.text == "attribution to the logit"
    assert plots.top_order(VALUES, 2) == [2, 1]
    assert plots.top_order(VALUES) == [2, 1, 3, 5, 4]                   # [CLS]'s exact 0 is left out


def test_attributions_to_a_probability_read_as_signed_percentages() -> None:
    values = [0.0, 0.0312, -0.00002, 0.005]          # shares of a probability: 2e-05 printed as "-2.00e-05" before
    fig = plots.top_tokens_figure(["[CLS]", "a", "b", "c"], values, x_title="attribution to the probability",
                                  percent_points=True)
    bar = fig.data[0]
    assert list(bar.text) == ["+3.12%", "+0.5%", "−0.002%"] and bar.customdata[2][1] == "−0.002%"
    assert fig.layout.xaxis.tickformat == ".1%" and fig.layout.xaxis.exponentformat == "none"
    assert fig.layout.xaxis.title.text == "attribution to the probability (percentage points)"
    tiny = plots.top_tokens_figure(["a"], [0.00002], percent_points=True)
    assert tiny.layout.xaxis.tickformat == ".4%"                           # ticks 0.0005% apart stay apart


def test_bars_of_nothing_and_mismatches() -> None:
    assert "No tokens" in plots.top_tokens_figure([], []).layout.annotations[0].text
    assert "is 0" in plots.top_tokens_figure(["a"], [0.0]).layout.annotations[0].text
    with pytest.raises(ValueError, match="3 tokens but 2 attributions"):
        plots.top_tokens_figure(["a", "b", "c"], [1.0, 2.0])


class Cells(HTMLParser):
    """The token cells as a browser reads them: (class, style, title, texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict] = []
        self._in: str | None = None
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self.scripts += 1
        classes = (attrs.get("class") or "").split()
        if "wt" in classes:
            self.cells.append({"classes": classes, "style": attrs["style"], "title": attrs["title"], "tok": "",
                               "v": ""})
        elif classes and classes[0] in ("wt-tok", "wt-v"):
            self._in = classes[0][3:]

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in and self.cells:
            self.cells[-1][self._in] += data


def test_tokens_are_filled_red_up_blue_down_by_share_of_the_largest() -> None:
    parser = Cells()
    parser.feed(token_html.attribution_html(TOKENS, VALUES, target_position=4))
    cells = parser.cells
    assert [c["tok"] for c in cells] == TOKENS and [c["v"] for c in cells] == [sig(v) for v in VALUES]
    assert cells[0]["style"] == "background: transparent"
    assert cells[2]["style"] == "background: rgba(37, 99, 235, 0.700)"          # the largest, blue
    assert cells[1]["style"] == "background: rgba(220, 38, 38, 0.175)"          # a quarter of it, red
    assert [("wt-target" in c["classes"]) for c in cells] == [False, False, False, False, True, False]
    assert cells[4]["title"] == f"position 4 · [MASK] · {sig(0.1)} · the token the head reads"


def test_tokens_are_escaped() -> None:
    hostile = ['<script>alert(1)</script>', '" onmouseover="x', "&amp;"]
    page = token_html.attribution_html(hostile, [1.0, -1.0, 0.5])
    parser = Cells()
    parser.feed(page)
    assert parser.scripts == 0 and [c["tok"] for c in parser.cells] == hostile
    assert 'onmouseover="x' not in page and "&amp;amp;" in page


def test_no_attribution_at_all_and_mismatches() -> None:
    parser = Cells()
    parser.feed(token_html.attribution_html(["a", "b"], [0.0, 0.0]))
    assert [c["style"] for c in parser.cells] == ["background: transparent"] * 2
    with pytest.raises(ValueError, match="2 tokens but 1 attributions"):
        token_html.attribution_html(["a", "b"], [0.0])


def test_bars_write_roberta_tokens_as_entities() -> None:
    fig = plots.top_tokens_figure(["<s>", "Ġthe", "<mask>", "</s>"], [0.1, 0.5, -0.3, 0.2])
    assert list(fig.layout.yaxis.ticktext) == ["1: Ġthe", "2: &lt;mask&gt;", "3: &lt;/s&gt;", "0: &lt;s&gt;"]
    assert [row[0] for row in fig.data[0].customdata] == list(fig.layout.yaxis.ticktext)
    assert not any(tag in t for t in fig.layout.yaxis.ticktext for tag in ("<s>", "</s>", "<mask>"))
