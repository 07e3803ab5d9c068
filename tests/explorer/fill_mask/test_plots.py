"""Pure Fill-mask figure builders: bars per mask by rank, probabilities over training."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from explorer.fill_mask import plots as fp  # noqa: E402


def _is_empty(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and len(fig.layout.annotations) == 1


def test_one_mask_bars_by_rank_with_token_labels() -> None:
    tokens, scores = [["the", "a", "the"]], [[0.5, 0.3, 0.1]]
    fig = fp.predictions_figure(tokens, scores, token_ids=[[7, 5, 7]])
    assert len(fig.data) == 1
    bar = fig.data[0]
    assert bar.orientation == "h" and list(bar.y) == [0, 1, 2] and list(bar.x) == [0.5, 0.3, 0.1]
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2]
    assert list(fig.layout.yaxis.ticktext) == ["the", "a", "the"]      # repeated text stays two bars
    assert fig.layout.yaxis.autorange == "reversed"                   # best on top
    assert [c[0] for c in bar.customdata] == ["the", "a", "the"] and bar.customdata[0][1] == 7
    assert bar.marker.color[0] != bar.marker.color[1]                 # the best bar stands out
    assert list(bar.text) == ["50%", "30%", "10%"] and bar.customdata[0][3] == "50%"   # explorer.formatting
    assert [a.text for a in fig.layout.annotations] == ["[MASK] 1"]
    fig.to_json()


def test_several_masks_give_several_subplots() -> None:
    tokens = [["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]]
    scores = [[0.6, 0.4], [0.7, 0.2], [0.5, 0.5], [0.9, 0.1]]
    fig = fp.predictions_figure(tokens, scores, titles=["m1", "m2", "m3", "m4"])
    assert len(fig.data) == 4
    axes = [(t.xaxis, t.yaxis) for t in fig.data]
    assert len(set(axes)) == 4                                        # one subplot each
    assert [a.text for a in fig.layout.annotations] == ["m1", "m2", "m3", "m4"]
    assert list(fig.layout.yaxis2.ticktext) == ["c", "d"] and list(fig.layout.yaxis4.ticktext) == ["g", "h"]
    # 4 masks: 3 columns, 2 rows; the fourth sits below the first
    assert fig.layout.xaxis4.domain == fig.layout.xaxis.domain
    assert fig.layout.yaxis4.domain[1] < fig.layout.yaxis.domain[0]


def test_predictions_validation_and_empty() -> None:
    assert _is_empty(fp.predictions_figure([], []))
    with pytest.raises(ValueError, match="differ in length"):
        fp.predictions_figure([["a"]], [])
    with pytest.raises(ValueError, match="mask 1: 2 tokens but 1 scores"):
        fp.predictions_figure([["a", "b"]], [[0.1]])
    with pytest.raises(ValueError, match="titles"):
        fp.predictions_figure([["a"]], [[0.1]], titles=["x", "y"])


TRACKED = [  # checkpoint -> mask -> token -> probability
    [{"cat": 0.1, "dog": 0.2}, {"mat": 0.3}],
    [{"cat": 0.3, "dog": 0.1}, {"mat": 0.5, "rug": 0.05}],
    [{"cat": 0.6, "dog": 0.05}, {"mat": 0.7, "rug": 0.01}],
]


def test_over_training_one_line_per_token_per_mask() -> None:
    fig = fp.over_training_figure([2, 4, 6], ["step 2", "step 4", "step 6"], TRACKED)
    names = [t.name for t in fig.data]
    assert sorted(names) == ["1: cat", "1: dog", "2: mat", "2: rug"]
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["1: cat"].x) == [2, 4, 6] and list(by_name["1: cat"].y) == [0.1, 0.3, 0.6]
    assert list(by_name["2: rug"].y) == [0.0, 0.05, 0.01]             # absent from a checkpoint -> 0
    assert [c[1] for c in by_name["1: cat"].customdata] == ["10%", "30%", "60%"]   # hover as percentages
    assert by_name["1: cat"].xaxis != by_name["2: mat"].xaxis           # one subplot per mask
    assert fig.layout.xaxis.title.text == "training step"
    fig.to_json()


def test_over_training_without_steps_uses_labels() -> None:
    fig = fp.over_training_figure([None, None, 6], ["a", "b", "step 6"], [[m[0]] for m in TRACKED])
    assert list(fig.data[0].x) == [0, 1, 2]
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "step 6"]
    assert {t.name for t in fig.data} == {"cat", "dog"}                 # one mask: plain token names


def test_over_training_caps_lines_and_says_so() -> None:
    tracked = [[{f"t{i}": i / 100 + c for i in range(30)}] for c in (0.0, 0.1)]
    fig = fp.over_training_figure([1, 2], ["1", "2"], tracked, max_lines=5)
    assert [t.name for t in fig.data] == ["t29", "t28", "t27", "t26", "t25"]   # highest peaks first
    assert "top 5 of 30" in fig.layout.annotations[0].text


def test_over_training_validation_and_empty() -> None:
    assert _is_empty(fp.over_training_figure([], [], []))
    with pytest.raises(ValueError, match="differ in length"):
        fp.over_training_figure([1], ["a", "b"], TRACKED[:2])
    with pytest.raises(ValueError, match="same number of masks"):
        fp.over_training_figure([1, 2], ["a", "b"], [TRACKED[0], TRACKED[1][:1]])


def _x_ranges(fig: go.Figure) -> dict[str, list[float]]:
    layout = fig.layout.to_plotly_json()
    return {name: axis["range"] for name, axis in layout.items() if name.startswith("xaxis")}


def test_every_mask_shares_one_probability_scale_from_0() -> None:
    # issue 28: "interest [MASK] ... river [MASK]": a 4.8% bar was drawn as long as a 42.9% one
    fig = fp.predictions_figure([["rates", "payments"], ["bank", "side"]], [[0.429, 0.2], [0.048, 0.01]])
    assert set(map(tuple, _x_ranges(fig).values())) == {(0.0, 0.429)}          # both plots: [0, the highest bar]
    assert fig.layout.xaxis.tickformat == fig.layout.xaxis2.tickformat == ".0%"
    assert fig.layout.xaxis.title.text == "probability"
    # bars keep their true lengths: 4.8% is a ninth of 42.9% on the same axis
    assert fig.data[1].x[0] / fig.layout.xaxis2.range[1] == pytest.approx(0.048 / 0.429)


def test_tiny_target_probabilities_read_in_percent_with_enough_decimals() -> None:
    fig = fp.predictions_figure([["cat"]], [[0.000182]])          # "cat 0.0182%" was drawn on "20μ … 180μ"
    assert list(fig.layout.xaxis.range) == [0.0, 0.000182] and fig.layout.xaxis.tickformat == ".3%"
    assert list(fig.data[0].text) == ["0.0182%"]
    assert fp.predictions_figure([["a"]], [[1e-9]]).data[0].text[0] == "<0.001%"


def test_zoom_gives_each_mask_its_own_scale_and_says_so() -> None:
    fig = fp.predictions_figure([["a", "b"], ["c", "d"]], [[0.429, 0.2], [0.048, 0.01]], zoom=True)
    assert _x_ranges(fig) == {"xaxis": [0.0, 0.429], "xaxis2": [0.0, 0.048]}
    assert (fig.layout.xaxis.tickformat, fig.layout.xaxis2.tickformat) == (".0%", ".1%")
    assert "own scale" in fig.layout.xaxis2.title.text


def test_zoom_figure_switches_scales_on_a_figure_read_back_from_json() -> None:
    import plotly.io as pio
    fig = fp.predictions_figure([["a", "b"], ["c", "d"]], [[0.429, 0.2], [0.048, 0.01]])
    zoomed = fp.zoom_figure(pio.from_json(fig.to_json()), True)
    assert _x_ranges(zoomed) == _x_ranges(fp.predictions_figure([["a", "b"], ["c", "d"]],
                                                                [[0.429, 0.2], [0.048, 0.01]], zoom=True))
    assert zoomed.layout.xaxis2.tickformat == ".1%" and zoomed.layout.xaxis2.domain == fig.layout.xaxis2.domain
    again = fp.zoom_figure(zoomed, False)
    assert _x_ranges(again) == _x_ranges(fig) and again.layout.xaxis2.title.text == "probability"
    empty = fp.predictions_figure([], [])
    assert fp.zoom_figure(empty, True) is empty                            # nothing to zoom


def test_over_training_masks_share_one_scale_from_0() -> None:
    fig = fp.over_training_figure([2, 4, 6], ["step 2", "step 4", "step 6"], TRACKED)
    top = max(p for checkpoint in TRACKED for mask in checkpoint for p in mask.values())      # 0.7
    assert fig.layout.yaxis.range == fig.layout.yaxis2.range
    assert fig.layout.yaxis.range[0] == 0 and fig.layout.yaxis.range[1] == pytest.approx(top * fp.LINE_HEADROOM)
    assert fig.layout.yaxis.tickformat == fig.layout.yaxis2.tickformat == ".0%"


RAW_TAGS = ("<s>", "</s>", "<mask>")


def test_predictions_write_roberta_tokens_and_mask_as_entities() -> None:
    fig = fp.predictions_figure([["<s>", "Ġthe", "</s>"], ["Ġa"]], [[0.5, 0.3, 0.1], [0.9]],
                                titles=["<mask> 1", "<mask> 2"])
    bar = fig.data[0]
    assert list(fig.layout.yaxis.ticktext) == ["&lt;s&gt;", "Ġthe", "&lt;/s&gt;"]
    assert [row[0] for row in bar.customdata] == ["&lt;s&gt;", "Ġthe", "&lt;/s&gt;"]
    assert bar.name == "&lt;mask&gt; 1" and "<extra>&lt;mask&gt; 1</extra>" in bar.hovertemplate
    assert [a.text for a in fig.layout.annotations] == ["&lt;mask&gt; 1", "&lt;mask&gt; 2"]
    shown = [*fig.layout.yaxis.ticktext, *(a.text for a in fig.layout.annotations), bar.name, bar.hovertemplate]
    assert not any(tag in text for text in shown for tag in RAW_TAGS)


def test_over_training_writes_roberta_tokens_and_mask_as_entities() -> None:
    tracked = [[{"</s>": 0.2, "Ġa": 0.1}], [{"</s>": 0.4, "Ġa": 0.3}]]
    fig = fp.over_training_figure([1, 2], ["step 1", "step 2"], tracked, titles=["<mask>"])
    assert [t.name for t in fig.data] == ["&lt;/s&gt;", "Ġa"]
    assert fig.data[0].hovertemplate.startswith("&lt;/s&gt;<br>") and "<extra>&lt;mask&gt;</extra>" in \
        fig.data[0].hovertemplate
    assert fig.layout.annotations[0].text == "&lt;mask&gt;"
    shown = [*(t.name for t in fig.data), *(t.hovertemplate for t in fig.data), fig.layout.annotations[0].text]
    assert not any(tag in text for text in shown for tag in RAW_TAGS)
