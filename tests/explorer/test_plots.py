"""Plot builders: pure data -> plotly Figure, checked without a browser."""
from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from PIL import ImageColor
from plotly.colors import qualitative

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


# --- themes: every figure follows light and dark mode ------------------------------------------

FIGURE_MODULES = ["explorer.plots", "explorer.attention.plots", "explorer.attention.ablation_plots",
                  "explorer.embeddings.plots", "explorer.fill_mask.plots", "explorer.heads.plots", "explorer.qa.plots",
                  "explorer.runs.plots", "explorer.training.plots", "explorer.finetune.plots",
                  "explorer.attention.neuron_plots", "explorer.why.plots"]
_T = ["[CLS]", "the", "cat", "the", "[SEP]"]
_MAPS = np.full((2, 2, 5, 5), 0.2)
_RECORDS = [{"kind": "train", "step": s, "mlm_loss": 5.0 / s, "nsp_loss": 0.7, "mlm_acc": 0.1, "nsp_acc": 0.5,
             "lr": 1e-4} for s in range(1, 4)] + [{"kind": "eval", "step": 3, "eval_mlm_loss": 2.0}]


def _builders() -> dict[str, Callable[[], go.Figure]]:
    from explorer.attention import ablation_plots, plots as ap
    from explorer.embeddings import plots as ep
    from explorer.fill_mask import plots as fp
    from explorer.heads import plots as hp
    from explorer.qa import plots as qp
    from explorer.runs import plots as rp
    from explorer.training import plots as tp
    from explorer.finetune import plots as ftp
    from explorer.attention import neuron_plots as np_
    from explorer.why import plots as wp
    rng = np.random.default_rng(0)
    window = qp.WindowProbs(0, ["a", "b", "c"], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6], answers=[(1, 2, "#1")])
    batch = {"rows": [{"tokens": ["[CLS]", "[MASK]", "[SEP]"], "mask_kind_names": ["special", "mask", "special"],
                       "label_tokens": [None, "cat", None]}]}
    return {
        "explorer.plots.figure": lambda: plots.figure([dict(type="bar", x=[0], y=[1])], title="t"),
        "explorer.plots.empty_figure": lambda: plots.empty_figure(),
        "explorer.plots.token_strip": lambda: plots.token_strip(_T, ["special", "A", "A", "B", "special"]),
        "explorer.attention.plots.attention_heatmap": lambda: ap.attention_heatmap(_MAPS[0, 0], _T, 0, 0),
        "explorer.attention.plots.head_view": lambda: ap.head_view(_MAPS[0], _T, [0, 1], 0),
        "explorer.attention.plots.model_view": lambda: ap.model_view(_MAPS, _T, focus=(0, 0)),
        "explorer.attention.plots.stats_heatmap": lambda: ap.stats_heatmap(np.ones((2, 2)), "entropy"),
        "explorer.attention.ablation_plots.ablation_figure": lambda: ablation_plots.ablation_figure(
            _T, [1, 2], [1.0, 2.0], [1.5, 2.5], [{"position": 1, "tokens": ["a"], "baseline": [0.5],
                                                  "ablated": [0.2]}], (0.8, 0.4)),
        "explorer.attention.ablation_plots.checkpoint_maps_figure": lambda: ablation_plots.checkpoint_maps_figure(
            list(_MAPS[0]), [_T, _T], ["step 1", "step 2"], 0, 0),
        "explorer.attention.ablation_plots.stats_over_steps_figure": lambda: ablation_plots.stats_over_steps_figure(
            [0, 5], ["a", "b"], {"entropy": np.ones(2)}, {}, 0, 0),
        "explorer.embeddings.plots.component_norms": lambda: ep.component_norms(_T, {"word": np.ones(5)}),
        "explorer.embeddings.plots.dimensions_heatmap": lambda: ep.dimensions_heatmap(_T, rng.normal(size=(5, 8))),
        "explorer.embeddings.plots.position_similarity_heatmap": lambda: ep.position_similarity_heatmap(np.eye(4)),
        "explorer.embeddings.plots.position_pca_scatter": lambda: ep.position_pca_scatter(rng.normal(size=(9, 2))),
        "explorer.embeddings.plots.contextual_pca_scatter": lambda: ep.contextual_pca_scatter(
            _T, ["special", "A", "A", "B", "special"], rng.normal(size=(5, 2)), 1),
        "explorer.embeddings.plots.segment_difference_bars": lambda: ep.segment_difference_bars(np.ones(4)),
        "explorer.embeddings.plots.position_similarity_grid": lambda: ep.position_similarity_grid(
            [("a", np.eye(3)), ("b", np.eye(3))]),
        "explorer.fill_mask.plots.predictions_figure": lambda: fp.predictions_figure([["a", "b"]], [[0.6, 0.3]]),
        "explorer.fill_mask.plots.zoom_figure": lambda: fp.zoom_figure(
            fp.predictions_figure([["a"], ["b"]], [[0.6], [0.1]]), True),
        "explorer.fill_mask.plots.over_training_figure": lambda: fp.over_training_figure(
            [1, 2], ["1", "2"], [[{"cat": 0.1}], [{"cat": 0.4}]]),
        "explorer.heads.plots.probability_bars": lambda: hp.probability_bars(["a", "b"], [0.7, 0.3], title="t"),
        "explorer.heads.plots.cls_attention_figure": lambda: hp.cls_attention_figure(_T, [0, 0, 0, 1, 1], _MAPS[0, :, 0]),
        "explorer.qa.plots.probabilities_figure": lambda: qp.probabilities_figure([window]),
        "explorer.qa.plots.windows_figure": lambda: qp.windows_figure(10, [(0, 6), (4, 10)], [(1, 3, "#1")]),
        "explorer.runs.plots.curves_figure": lambda: rp.curves_figure(_RECORDS, rp.MLM_LOSS_SERIES, "MLM loss"),
        "explorer.runs.plots.mlm_loss_figure": lambda: rp.mlm_loss_figure(_RECORDS),
        "explorer.runs.plots.nsp_loss_figure": lambda: rp.nsp_loss_figure(_RECORDS),
        "explorer.runs.plots.accuracy_figure": lambda: rp.accuracy_figure(_RECORDS),
        "explorer.runs.plots.lr_figure": lambda: rp.lr_figure(_RECORDS),
        "explorer.training.plots.masked_strip": lambda: tp.masked_strip(["[CLS]", "[MASK]"], ["special", "mask"]),
        "explorer.training.plots.batch_figure": lambda: tp.batch_figure(batch),
        "explorer.attention.neuron_plots.vectors_figure": lambda: np_.vectors_figure(
            _T, 1, np.ones(4), np.ones((5, 4)), np.ones((5, 4)), title="t"),
        "explorer.attention.neuron_plots.scores_figure": lambda: np_.scores_figure(_T, 1, [1.0] * 5, [0.2] * 5),
        "explorer.why.plots.top_tokens_figure": lambda: wp.top_tokens_figure(_T, [0.1, -0.2, 0.3, 0.0, 0.5]),
        "explorer.finetune.plots.loss_figure": lambda: ftp.loss_figure(
            [{"kind": "train", "step": 1, "loss": 0.7}, {"kind": "eval", "step": 1, "eval_qa_loss": 0.9}], "eval_qa_loss"),
        "explorer.finetune.plots.metric_figure": lambda: ftp.metric_figure(
            [{"kind": "train", "step": 1, "accuracy": 0.5}, {"kind": "eval", "step": 1, "eval_accuracy": 0.6}],
            [("accuracy", "accuracy")]),
    }


def _figure_builders() -> set[str]:
    """Every public function of the figure modules that is annotated to return a Figure."""
    found = set()
    for name in FIGURE_MODULES:
        module = importlib.import_module(name)
        for attr, fn in vars(module).items():
            if inspect.isfunction(fn) and fn.__module__ == name and not attr.startswith("_") \
                    and "Figure" in str(inspect.signature(fn).return_annotation):
                found.add(f"{name}.{attr}")
    return found


def _transparent(color: str | None) -> bool:
    return color is not None and color.replace(" ", "") in ("rgba(0,0,0,0)", "transparent")


def test_every_figure_builder_is_checked_for_themes() -> None:
    assert _figure_builders() == set(_builders())      # a new builder joins the theme check below


@pytest.mark.parametrize("name", sorted(_builders()))
def test_figures_are_transparent_and_theme_neutral(name: str) -> None:
    """No white box in dark mode: paper and plot show the page through; text uses FONT_COLOR, which
    assets/style.css turns light under `.dark`; grid lines are a translucent grey."""
    fig = _builders()[name]()
    template = fig.layout.template.layout
    assert template.to_plotly_json() == plots.TEMPLATE.layout.to_plotly_json()      # the app's template
    for key in ("paper_bgcolor", "plot_bgcolor"):
        assert _transparent(fig.layout[key] or template[key]), f"{name}: {key} = {fig.layout[key]}"
    assert (fig.layout.font.color or template.font.color) == plots.FONT_COLOR
    for axis in [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]:
        assert fig.layout[axis].gridcolor in (None, plots.GRID_COLOR), f"{name}: {axis} grid"
    assert fig.layout.legend.bgcolor in (None, plots.TRANSPARENT)


def test_the_template_is_the_default_and_neutral() -> None:
    assert pio.templates.default == plots.TEMPLATE_NAME
    layout = plots.TEMPLATE.layout
    assert _transparent(layout.paper_bgcolor) and _transparent(layout.plot_bgcolor)
    assert "0.25" in layout.xaxis.gridcolor and layout.xaxis.gridcolor == layout.yaxis.gridcolor   # grey, translucent
    css = (Path(__file__).resolve().parents[2] / "assets" / "style.css").read_text(encoding="utf-8")
    red, green, blue = (int(plots.FONT_COLOR[i:i + 2], 16) for i in (1, 3, 5))
    assert f'.dark .js-plotly-plot .main-svg text[style*="fill: rgb({red}, {green}, {blue})"]' in css


def _contrast(one: str, other: str) -> float:
    """WCAG 2 contrast ratio of two colours (relative luminance of sRGB)."""
    def luminance(color: str) -> float:
        channels = [c / 255 for c in ImageColor.getrgb(color)]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_categorical_colours_come_from_one_palette_and_read_on_both_themes() -> None:
    """Statistics, embedding components and fine-tuning metrics take d3's category10 (plotly.colors), each
    name its own colour, and every colour keeps at least 2:1 contrast on the light page and on the dark one."""
    from explorer.page import THEME
    from explorer.attention.ablation_plots import STAT_COLORS
    from explorer.embeddings.plots import COMPONENT_COLORS, COMPONENT_LABELS
    from explorer.finetune.plots import METRIC_COLORS

    assert plots.CATEGORY_COLORS == tuple(qualitative.D3) and METRIC_COLORS == plots.CATEGORY_COLORS
    for colours, names in ((STAT_COLORS, ("cls", "sep", "self", "prev", "next", "entropy", "distance")),
                           (COMPONENT_COLORS, tuple(COMPONENT_LABELS))):
        assert set(colours) == set(names) and len(set(colours.values())) == len(names)
    eleven = plots.category_colors([str(i) for i in range(11)])
    assert eleven["10"] == eleven["0"] and len(set(eleven.values())) == 10       # cycled past ten
    for colour in plots.CATEGORY_COLORS:
        assert _contrast(colour, "#ffffff") >= 2 and _contrast(colour, THEME.neutral_950) >= 2, colour


# --- probabilities: one scale from 0, ticks as percentages ------------------------------------

PERCENT_FORMAT = r"^\.\d+%$"          # d3: fixed decimals, times 100, a % sign; never "s" (SI) or "e"


@pytest.mark.parametrize("top, tickformat", [(1.0, ".0%"), (0.429, ".0%"), (0.048, ".1%"), (0.000182, ".3%"),
                                             (1e-9, ".8%"), (0.0, ".0%"), (float("nan"), ".0%")])
def test_percent_tickformat_has_enough_decimals_for_the_ticks(top: float, tickformat: str) -> None:
    assert plots.percent_tickformat(top) == tickformat
    if top > 0:      # Plotly's ticks (about 10 at most: steps of 1, 2 or 5 x 10^n) read as distinct numbers
        step = 10 ** np.floor(np.log10(top / 10))
        decimals = int(tickformat[1:-1])
        ticks = [f"{i * step * 100:.{decimals}f}" for i in range(1, 11)]
        assert len(set(ticks)) == 10 and "0" not in {t.strip("0.") for t in ticks}


def test_probability_axis_starts_at_0_and_reads_in_percent() -> None:
    axis = plots.probability_axis(0.000182)
    assert axis["range"] == [0.0, 0.000182] and axis["tickformat"] == ".3%" and axis["exponentformat"] == "none"
    assert axis["title"]["text"] == "probability"
    assert plots.probability_axis(0.0)["range"] == [0.0, 1.0]               # nothing to show: the whole scale
    assert "title" not in plots.probability_axis(0.5, title=None)
    assert plots.top_value([[0.1, 0.4], [], [float("nan"), 0.2]]) == 0.4 and plots.top_value([]) == 0.0


def _probability_axes(fig: go.Figure) -> list[tuple[str, dict]]:
    """Every axis (and colour bar) of ``fig`` that shows a probability, by its title."""
    layout = fig.layout.to_plotly_json()
    axes = [(k, v) for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))
            and "probab" in str(v.get("title", {}).get("text", "")).lower()]
    return axes + [(f"colorbar of {t.type}", t.colorbar.to_plotly_json()) for t in fig.data
                   if getattr(t, "colorbar", None) is not None and "%" in str(getattr(t, "hovertemplate", "") or "")
                   and "p}" in str(t.hovertemplate)]


def _tiny_probability_figures() -> dict[str, go.Figure]:
    """The figures that draw probabilities, fed tiny ones (the values that gave "20μ" and "2e-05" ticks)."""
    from explorer.fill_mask import plots as fp
    from explorer.heads import plots as hp
    from explorer.qa import plots as qp
    from explorer.why import plots as wp
    tiny = [0.000182, 0.0000421]
    window = qp.WindowProbs(0, ["a", "b"], tiny, tiny[::-1])
    return {
        "fill-mask bars": fp.predictions_figure([["cat", "dog"], ["mat", "rug"]], [tiny, [t / 3 for t in tiny]]),
        "fill-mask bars, zoomed": fp.predictions_figure([["cat", "dog"]], [tiny], zoom=True),
        "fill-mask over training": fp.over_training_figure([1, 2], ["1", "2"],
                                                           [[{"cat": tiny[0]}], [{"cat": tiny[1]}]]),
        "QA start/end": qp.probabilities_figure([window]),
        "heads bars": hp.probability_bars(["IsNext", "NotNext"], tiny),
        "heads [CLS] attention": hp.cls_attention_figure(["[CLS]", "a"], [0, 0], [[0.0004, 0.0003]]),
        "why, probability": wp.top_tokens_figure(["[CLS]", "a", "b"], [0.0, 0.00002, -0.00001],
                                                 x_title="attribution to the probability", percent_points=True),
    }


@pytest.mark.parametrize("name", sorted(_tiny_probability_figures()))
def test_probability_axes_are_percentages_never_si_prefixes_or_exponents(name: str) -> None:
    fig = _tiny_probability_figures()[name]
    axes = _probability_axes(fig)
    assert axes, f"{name}: no probability axis found"
    for axis_name, axis in axes:
        assert re.match(PERCENT_FORMAT, axis.get("tickformat", "")), (name, axis_name, axis.get("tickformat"))
    texts = [str(t) for trace in fig.data for t in (getattr(trace, "text", None) or [])]
    texts += [str(c) for trace in fig.data for row in (getattr(trace, "customdata", None) or []) for c in row]
    assert not [t for t in texts if re.search(r"\d[eE][-+]?\d|μ", t)], (name, texts)


def test_why_logit_attributions_have_no_si_prefix_either() -> None:
    from explorer.why import plots as wp
    fig = wp.top_tokens_figure(["[CLS]", "a"], [0.0, 0.00002], x_title="attribution to the logit")
    assert fig.layout.xaxis.exponentformat == "none" and fig.layout.xaxis.tickformat is None


def test_token_strip_hover_writes_roberta_tokens_as_entities() -> None:
    fig = plots.token_strip(["<s>", "Ġthe", "<mask>", "</s>"], ["special", "A", "A", "special"])
    hovers = {int(x): row[0] for trace in fig.data for x, row in zip(trace.x, trace.customdata)}
    assert hovers == {0: "&lt;s&gt;", 1: "Ġthe", 2: "&lt;mask&gt;", 3: "&lt;/s&gt;"}
    assert list(fig.layout.xaxis.ticktext) == ["&lt;s&gt;", "Ġthe", "&lt;mask&gt;", "&lt;/s&gt;"]   # not twice
