"""The Attention tab's pure figure builders and exports: structure, labels by position, files that parse."""
from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import plotly.graph_objects as go
import pytest
from PIL import Image, ImageColor

from explorer.attention import ablation_plots
from explorer.attention import export as attention_export
from explorer.attention import plots as attention_plots

TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]     # "the" twice on purpose
N = len(TOKENS)


def _maps(layers: int = 2, heads: int = 3, n: int = N, seed: int = 0) -> np.ndarray:
    """Random row-stochastic maps (L, nh, S, S)."""
    logits = np.random.default_rng(seed).normal(size=(layers, heads, n, n)) * 3
    e = np.exp(logits)
    return e / e.sum(-1, keepdims=True)


def _z(trace) -> np.ndarray:
    return np.asarray(trace.z, dtype=float)


# --- heatmap -----------------------------------------------------------------------------

def test_heatmap_places_tokens_by_position() -> None:
    attn = _maps()[1, 2]
    fig = attention_plots.attention_heatmap(attn, TOKENS, 1, 2)
    (trace,) = fig.data
    assert isinstance(trace, go.Heatmap) and _z(trace).shape == (N, N)
    np.testing.assert_allclose(_z(trace), attn, atol=1e-6)
    assert list(trace.x) == list(range(N)) and list(trace.y) == list(range(N))
    assert list(fig.layout.xaxis.ticktext) == TOKENS and list(fig.layout.xaxis.tickvals) == list(range(N))
    assert list(fig.layout.yaxis.ticktext) == TOKENS                      # both "the" rows stay separate
    assert list(fig.layout.yaxis.range) == [N - 0.5, -0.5]              # query 0 on top
    assert trace.zmin == 0 and trace.zmax == 1
    assert "Layer 1, head 2" in fig.layout.title.text
    assert trace.customdata[5][1][1] == "1: the" and trace.customdata[5][1][0] == "5: the"


def test_heatmap_rejects_mismatched_input() -> None:
    with pytest.raises(ValueError, match="square"):
        attention_plots.attention_heatmap(np.zeros((3, 4)), TOKENS[:3], 0, 0)
    with pytest.raises(ValueError, match="covers 8 tokens but 3"):
        attention_plots.attention_heatmap(np.eye(N), TOKENS[:3], 0, 0)


# --- head view ---------------------------------------------------------------------------

def _links(shape) -> list[tuple[int, int]]:
    """(query, key) pairs of a head-view path "M0,iL1,j..."."""
    return [tuple(int(float(v)) for v in (seg.split("L")[0].split(",")[1], seg.split("L")[1].split(",")[1]))
            for seg in shape.path.split("M")[1:]]


def test_head_view_lines_labels_and_colours() -> None:
    layer = np.zeros((3, N, N))
    layer[0] = np.eye(N)                                     # head 0: each token to itself (weight 1)
    layer[2, :, 0] = 0.99                                    # head 2: everything to [CLS], a little elsewhere
    layer[2, :, 1] = 0.01
    fig = attention_plots.head_view(layer, TOKENS, heads=[0, 2], layer=4)
    legend = [s for s in fig.layout.shapes if s.showlegend]
    assert [s.name for s in legend] == ["head 0", "head 2"]
    assert [s.line.color for s in legend] == [attention_plots.HEAD_COLORS[0], attention_plots.HEAD_COLORS[2]]
    paths = [s for s in fig.layout.shapes if s.type == "path"]
    assert {s.legendgroup for s in paths} == {"head 0", "head 2"}                     # a legend click hides its head
    assert {s.line.color for s in paths if s.name == "head 0"} == {attention_plots.HEAD_COLORS[0]}
    (head0,) = [s for s in paths if s.name == "head 0"]
    assert _links(head0) == [(i, i) for i in range(N)] and head0.opacity == pytest.approx(0.9)   # weight 1: darkest
    head2 = [s for s in paths if s.name == "head 2"]
    assert sorted(link for s in head2 for link in _links(s)) == [(i, 0) for i in range(N)]   # 0.01 is under the threshold
    labels = fig.data
    assert [list(t.text) for t in labels] == [TOKENS, TOKENS] and list(labels[0].y) == list(range(N))
    assert list(labels[0].x) == [0] * N and list(labels[1].x) == [1] * N                   # queries left, keys right
    assert "Layer 4" in fig.layout.legend.title.text


def test_head_view_opacity_follows_the_weight() -> None:
    layer = np.zeros((1, 3, 3))
    layer[0, 0] = [0.9, 0.1, 0.0]                            # query 0: strong link to key 0, weak to key 1
    layer[0, 1] = [0.0, 0.5, 0.5]
    layer[0, 2] = [0.0, 0.3, 0.7]
    fig = attention_plots.head_view(layer, ["a", "b", "c"], heads=[0], layer=0)
    opacity = {link: s.opacity for s in fig.layout.shapes if s.type == "path" for link in _links(s)}
    for (query, key), alpha in opacity.items():
        assert abs(alpha - layer[0, query, key]) <= 0.5 / attention_plots.HEAD_VIEW_LEVELS   # alpha = weight, bucketed
    assert opacity[(0, 0)] > opacity[(2, 2)] > opacity[(1, 1)] > opacity[(2, 1)] > opacity[(0, 1)]
    assert len(fig.layout.shapes) <= attention_plots.HEAD_VIEW_LEVELS + 1 and len(fig.data) == 2   # few elements: fast


def test_head_view_legend_sits_above_the_plot_and_hover_names_weights() -> None:
    layer = np.zeros((2, N, N))
    layer[0, :, 0] = 1.0                                     # head 0: all to [CLS]
    layer[1] = np.eye(N)                                     # head 1: to itself
    fig = attention_plots.head_view(layer, TOKENS, heads=[0, 1], layer=0)
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.y >= 1 and legend.yanchor == "bottom"    # above, not over the links
    assert fig.layout.margin.t >= attention_plots.HEAD_VIEW_TOP_MARGIN
    query, key = fig.data
    assert query.hovertext[5].startswith("query 5: the")
    assert "head 0: [CLS] 100%" in query.hovertext[5] and "head 1: the 100%" in query.hovertext[5]
    assert key.hovertext[0].startswith("key 0: [CLS]") and "head 0: [CLS] 100%" in key.hovertext[0]
    assert len(set(attention_plots.HEAD_COLORS[:12])) == 12                               # BERT-base: 12 distinct colours


def test_head_view_checks_heads() -> None:
    layer = _maps()[0]
    empty = attention_plots.head_view(layer, TOKENS, heads=[], layer=0)
    assert empty.layout.annotations[0].text.startswith("Choose at least one head")
    with pytest.raises(ValueError, match=r"heads \[3\] do not exist"):
        attention_plots.head_view(layer, TOKENS, heads=[3], layer=0)


def test_head_view_makes_the_chosen_head_stand_out() -> None:
    """With a chosen head, its links are drawn last (on top), more opaque and thicker than the same weight in
    any other head; the legend says so in words that hold on a light and a dark page alike."""
    layer = np.zeros((3, N, N))
    layer[:, :, 0] = 1.0                                     # every head: all to [CLS] (weight 1, the same level)
    fig = attention_plots.head_view(layer, TOKENS, heads=[0, 1, 2], layer=3, focus=1)
    paths = [s for s in fig.layout.shapes if s.type == "path"]
    chosen = [s for s in paths if s.name == "head 1 (chosen)"]
    others = [s for s in paths if s.name in ("head 0", "head 2")]
    assert len(chosen) == 1 and len(others) == 2 and paths[-1] is chosen[0]          # drawn on top
    assert all(chosen[0].opacity > o.opacity and chosen[0].line.width > o.line.width for o in others)
    assert chosen[0].opacity == pytest.approx(attention_plots.level_opacity(attention_plots.HEAD_VIEW_LEVELS))
    title = fig.layout.legend.title.text
    assert "a thicker, more opaque line is more attention" in title and "darker" not in title
    assert "Layer 3" in title and "Head 1, the chosen head, is drawn strongest" in title
    alone = attention_plots.head_view(layer, TOKENS, heads=[0, 2], layer=3, focus=1)   # not drawn: no emphasis
    assert {s.opacity for s in alone.layout.shapes if s.type == "path"} == {chosen[0].opacity}
    assert "chosen head" not in alone.layout.legend.title.text


def test_head_view_links_thicken_with_the_weight() -> None:
    for chosen in (None, True, False):
        styles = [attention_plots.link_style(level, chosen) for level in range(1, attention_plots.HEAD_VIEW_LEVELS + 1)]
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(styles, styles[1:])), chosen   # more opaque, thicker
    assert attention_plots.link_style(3, True)[0] > attention_plots.link_style(3, False)[0]


# --- model view --------------------------------------------------------------------------

def test_model_view_grid_and_focus() -> None:
    maps = _maps(layers=2, heads=3)
    fig = attention_plots.model_view(maps, TOKENS, focus=(1, 2))
    (trace,) = fig.data                                       # one heatmap of the tiled maps
    z, step = _z(trace), N + 1
    assert z.shape == (2 * step - 1, 3 * step - 1)
    np.testing.assert_allclose(z[step:step + N, step:step + N], maps[1, 1], atol=1e-6)   # layer 1, head 1
    np.testing.assert_allclose(z[:N, 2 * step:2 * step + N], maps[0, 2], atol=1e-6)      # layer 0, head 2
    assert np.isnan(z[N, :]).all() and np.isnan(z[:, N]).all()                          # gaps between maps
    assert trace.coloraxis == "coloraxis" and fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1
    assert trace.x[step + 4] == "H1 key token 4" and trace.y[step + 2] == "L2 query token 2"   # row 1 is layer 2
    assert len(set(trace.x)) == len(trace.x) and len(set(trace.y)) == len(trace.y)    # no category merges
    (frame,) = fig.layout.shapes                              # around layer 1, head 2
    assert frame.x0 < 2 * step <= 2 * step + N - 1 < frame.x1 < 3 * step
    assert frame.y0 < step <= step + N - 1 < frame.y1 < 2 * step
    texts = {a.text for a in fig.layout.annotations}
    assert {"H0", "H1", "H2", "L1", "L2"} <= texts and "L0" not in texts      # layers from 1, heads from 0
    assert "pick a layer and head" in fig.layout.title.text


def test_model_view_pools_long_inputs_keeping_rows_stochastic() -> None:
    n = 100
    maps = _maps(layers=1, heads=2, n=n)
    fig = attention_plots.model_view(maps, [f"t{i}" for i in range(n)])
    block = -(-n // attention_plots.MODEL_VIEW_MAX_TOKENS)
    size = -(-n // block)
    z = _z(fig.data[0])
    assert z.shape == (size, 2 * (size + 1) - 1)
    np.testing.assert_allclose(z[:, :size].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(z[:, size + 1:].sum(-1), 1.0, atol=1e-5)
    assert f"blocks of {block} tokens" in fig.layout.title.text and "key block" in fig.data[0].x[0]
    pooled = attention_plots.pool_map(np.eye(5), 2)
    np.testing.assert_allclose(pooled, [[1, 0, 0], [0, 1, 0], [0, 0, 1]])


def test_the_model_view_makes_no_float64_or_full_size_copy_of_long_inputs() -> None:
    """Issue 34: the model view converted (L, nh, S, S) to float64 and padded it (two more full copies). Now a
    float32 or float16 input is pooled as it is: what numpy allocates stays far under the input's own size."""
    import tracemalloc

    maps = _maps(layers=4, heads=4, n=400).astype(np.float32)                     # 10 MB
    tokens = [f"t{i}" for i in range(400)]
    for given in (maps, maps.astype(np.float16)):
        tracemalloc.start()
        fig = attention_plots.model_view(given, tokens)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < given.nbytes / 2, f"{peak} bytes allocated for a {given.nbytes}-byte input"
        assert len(fig.data) == 1
    pooled = attention_plots.pool_map(maps.astype(np.float16), 8)
    assert pooled.dtype == np.float32 and attention_plots.tile_maps(pooled).dtype == np.float32
    np.testing.assert_allclose(pooled, attention_plots.pool_map(maps.astype(np.float64), 8), atol=1e-3)


def test_tile_maps_places_each_map_in_its_cell() -> None:
    maps = np.arange(2 * 2 * 3 * 3, dtype=float).reshape(2, 2, 3, 3)
    tiled = attention_plots.tile_maps(maps)
    assert tiled.shape == (7, 7)
    for layer in range(2):
        for head in range(2):
            np.testing.assert_array_equal(tiled[4 * layer:4 * layer + 3, 4 * head:4 * head + 3], maps[layer, head])


# --- statistics --------------------------------------------------------------------------

def test_stats_heatmap() -> None:
    values = np.arange(6, dtype=float).reshape(2, 3) / 10
    fig = attention_plots.stats_heatmap(values, "share to [SEP]", focus=(1, 0))
    (trace,) = fig.data
    np.testing.assert_allclose(_z(trace), values, atol=1e-6)
    assert list(trace.x) == [0, 1, 2] and list(trace.y) == [1, 2]             # layers from 1, heads from 0
    assert fig.layout.yaxis.autorange == "reversed" and "share to [SEP]" in fig.layout.title.text
    (frame,) = fig.layout.shapes                                              # values' row 1: layer 2
    assert (frame.x0, frame.y0, frame.y1) == (-0.5, 1.5, 2.5)


@pytest.mark.parametrize(("top", "widest"), [(2.27, "2.27"), (12.345, "12.3"), (511.6, "512")])
def test_stats_heatmap_values_fit_their_cells(top: float, widest: str) -> None:
    """Twelve heads, whatever the screen: each head's column is ``STATS_CELL_PX`` wide (a phone's block scrolls
    sideways), and the widest printed value, four characters at most, fits in it with room to spare."""
    values = np.linspace(0, top, 6 * 12).reshape(6, 12)
    fig = attention_plots.stats_heatmap(values, "mean distance |i-j| (tokens)")
    (trace,) = fig.data
    per_head = (fig.layout.width - fig.layout.margin.l - fig.layout.margin.r) / 12
    decimals = int(trace.texttemplate.split(".")[1][0])                      # "%{z:.2f}" -> 2
    assert f"{top:.{decimals}f}" == widest and fig.layout.width > 390
    assert per_head >= attention_plots.STATS_CELL_PX > len(widest) * 0.6 * trace.textfont.size + 6


# --- ablation and over training ------------------------------------------------------------

def test_ablation_figure_panels() -> None:
    fills = [{"position": 3, "tokens": ["sat", "ran"], "baseline": [0.6, 0.1], "ablated": [0.2, 0.3]}]
    fig = ablation_plots.ablation_figure(TOKENS, [1, 2, 5], [1.0, 2.0, 3.0], [1.5, 2.5, 3.5], fills, (0.8, 0.4))
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert len(bars) == 6 and {t.name for t in bars} == {"baseline", "ablated"}
    assert list(bars[0].y) == [1.0, 2.0, 3.0] and list(bars[1].y) == [1.5, 2.5, 3.5]
    titles = [a.text for a in fig.layout.annotations]
    assert "in nats" in titles[0] and "mean 2.000 → 2.500 nats" in titles[0] and "position 3" in titles[1]
    assert "P(IsNext): 80% → 40%" in titles[2]                                  # probabilities as percentages
    assert list(fig.layout.xaxis.ticktext) == ["the", "cat", "the"]          # by position: both "the"s
    assert list(fig.layout.xaxis2.ticktext) == ["sat", "ran"]
    assert fig.layout.yaxis.title.text == "loss (nats)" and bars[0].customdata[0][1] == "1 nats"
    filler, nsp = fig.layout.yaxis2, fig.layout.yaxis3
    assert filler.tickformat.endswith("%") and nsp.tickformat.endswith("%")       # never 0.2, 0.4, ... nor "μ"
    assert tuple(filler.range) == (0.0, 0.6) and tuple(nsp.range) == (0.0, 1.0)    # from 0: a shared, honest scale
    assert [row[1] for row in bars[2].customdata] == ["60%", "10%"]              # hover: percentages
    assert "%{customdata[1]}" in bars[2].hovertemplate and ".3f" not in bars[2].hovertemplate
    empty = ablation_plots.ablation_figure(TOKENS, [], [], [])
    assert "Nothing to compare" in empty.layout.annotations[0].text
    with pytest.raises(ValueError, match="same length"):
        ablation_plots.ablation_figure(TOKENS, [1], [1.0, 2.0], [1.0])


def test_checkpoint_small_multiples() -> None:
    maps = list(_maps(layers=1, heads=4)[0])
    labels = [f"step {s}" for s in (0, 10, 20, 30)]
    fig = ablation_plots.checkpoint_maps_figure(maps, [TOKENS] * 4, labels, layer=1, head=2)
    assert len(fig.data) == 4 and [a.text for a in fig.layout.annotations][:4] == labels
    np.testing.assert_allclose(_z(fig.data[3]), maps[3], atol=1e-6)
    assert list(fig.layout.xaxis.ticktext) == TOKENS and fig.layout.yaxis.autorange == "reversed"
    assert "Layer 1, head 2 over training" in fig.layout.title.text
    with pytest.raises(ValueError, match="one entry per checkpoint"):
        ablation_plots.checkpoint_maps_figure(maps, [TOKENS], labels, 0, 0)


def test_statistics_over_steps() -> None:
    stats = {name: np.linspace(0, 1, 3) for name in ("entropy", "cls", "sep", "self", "prev", "next", "distance")}
    titles = {"entropy": "entropy (nats)"}
    fig = ablation_plots.stats_over_steps_figure([0, 50, 100], ["a", "b", "c"], stats, titles, 0, 1)
    assert len(fig.data) == 7 and list(fig.data[0].x) == [0, 50, 100]
    assert fig.layout.xaxis.title.text == "training step"
    assert "entropy (nats)" in {t.name for t in fig.data}
    unknown = ablation_plots.stats_over_steps_figure([None, 5, 9], ["a", "b", "c"], stats, titles, 0, 1)
    assert list(unknown.data[0].x) == [0, 1, 2] and list(unknown.layout.xaxis.ticktext) == ["a", "b", "c"]


# --- exports -----------------------------------------------------------------------------

def _png_pixels(data: bytes) -> np.ndarray:
    """Decode ``data`` with Pillow: it must be a PNG of 8-bit RGB pixels."""
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG" and image.mode == "RGB"
        image.verify()
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image)


def test_png_is_a_valid_image_of_the_cells() -> None:
    attn = np.eye(N)
    pixels = _png_pixels(attention_export.heatmap_png(attn, cell=4))
    assert pixels.shape == (4 * N, 4 * N, 3)
    dark, light = attention_export.colors(np.array([1.0, 0.0]))
    assert (pixels[0:4, 0:4] == dark).all() and (pixels[0:4, 4:8] == light).all()
    assert (pixels[-1, -1] == dark).all()
    # every pixel: its cell's colour as the canvas draws it (the weight at its uint8 level) on the heatmap's
    # scale, whose ends are the scale's own colours
    attn = _maps(1, 1)[0, 0]
    pixels = _png_pixels(attention_export.heatmap_png(attn, cell=3))
    expected = np.repeat(np.repeat(attention_export.colors(np.rint(attn * 255) / 255), 3, axis=0), 3, axis=1)
    np.testing.assert_array_equal(pixels, expected)
    ends = attention_export.colors(np.array([0.0, 1.0]))
    assert [tuple(c) for c in ends] == [ImageColor.getrgb(attention_plots.COLORSCALE[0][1]),
                                        ImageColor.getrgb(attention_plots.COLORSCALE[-1][1])]
    big = _png_pixels(attention_export.heatmap_png(np.full((600, 600), 1 / 600), cell=12))
    assert big.shape[0] <= attention_export.MAX_PNG_SIDE
    with pytest.raises(ValueError, match="square"):
        attention_export.heatmap_png(np.zeros((2, 3)))


def test_svg_is_xml_with_labels_by_position() -> None:
    attn = _maps()[0, 0]
    svg = attention_export.heatmap_svg(attn, TOKENS + [], title="Layer 0, head 0 <&>")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "Layer 0, head 0 <&>" in texts
    assert texts.count("1: the") == 2 and texts.count("5: the") == 2      # row and column label each
    cells = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    assert len(cells) == N * N
    assert cells[N + 2].find(f"{ns}title").text == f"1: the → 2: cat: {attn[1, 2]:.3f}"
    with pytest.raises(ValueError, match="does not match"):
        attention_export.heatmap_svg(attn, TOKENS[:3])


def test_json_export_and_files(tmp_path) -> None:
    attn = _maps()[1, 0]
    stats = {"entropy": np.float64(1.5), "self": 0.25}
    data = json.loads(attention_export.attention_json(TOKENS, 1, 0, attn, stats, source="tiny", extra=[np.int64(3)]))
    assert data["tokens"] == TOKENS and data["layer"] == 1 and data["head"] == 0
    assert data["stats"] == {"entropy": 1.5, "self": 0.25} and data["source"] == "tiny" and data["extra"] == [3]
    np.testing.assert_allclose(np.array(data["attention"]).sum(-1), 1.0, atol=1e-5)
    paths = attention_export.write_exports(tmp_path / "out", "attention-L1-H0", attn, TOKENS, 1, 0, stats, title="t")
    assert [p.name for p in paths] == ["attention-L1-H0.png", "attention-L1-H0.svg", "attention-L1-H0.json"]
    assert _png_pixels(paths[0].read_bytes()).shape[2] == 3
    ET.fromstring(paths[1].read_text(encoding="utf-8"))
    assert json.loads(paths[2].read_text(encoding="utf-8"))["tokens"] == TOKENS


# --- RoBERTa's tokens as text (Plotly reads <s> as strike-through) ---------------------------

ROBERTA = ["<s>", "Ġthe", "<mask>", "</s>"]


def _raw(texts) -> bool:
    """Whether any of ``texts`` holds a RoBERTa special as a raw tag."""
    return any(tag in str(text) for text in texts for tag in ("<s>", "</s>", "<mask>"))


def test_heatmap_hover_writes_roberta_tokens_as_entities() -> None:
    fig = attention_plots.attention_heatmap(_maps(1, 1, 4)[0, 0], ROBERTA, 1, 0)
    custom = np.asarray(fig.data[0].customdata, dtype=object)
    assert custom[0, 2, 0] == "0: &lt;s&gt;" and custom[0, 2, 1] == "2: &lt;mask&gt;"
    assert custom[3, 3, 0] == "3: &lt;/s&gt;"
    assert list(fig.layout.xaxis.ticktext) == ["&lt;s&gt;", "Ġthe", "&lt;mask&gt;", "&lt;/s&gt;"]
    assert not _raw(custom.ravel()) and not _raw(fig.layout.yaxis.ticktext)


def test_head_view_labels_and_hovers_write_roberta_tokens_as_entities() -> None:
    fig = attention_plots.head_view(_maps(1, 2, 4)[0], ROBERTA, [0, 1], 1)
    for trace in fig.data:
        assert list(trace.text) == ["&lt;s&gt;", "Ġthe", "&lt;mask&gt;", "&lt;/s&gt;"]
        assert trace.hovertext[0].count("&lt;s&gt;") >= 1 and "<br>head 0: " in trace.hovertext[0]
        assert not _raw(trace.text) and not _raw(trace.hovertext)


def test_ablation_figure_writes_roberta_tokens_as_entities() -> None:
    fills = [{"position": 2, "tokens": ["<s>", "Ġcat"], "baseline": [0.6, 0.1], "ablated": [0.2, 0.3]}]
    fig = ablation_plots.ablation_figure(ROBERTA, [0, 1], [1.0, 2.0], [1.5, 2.5], fills)
    loss, filler = fig.data[0], fig.data[2]
    assert [row[0] for row in loss.customdata] == ["0: &lt;s&gt;", "1: Ġthe"]
    assert list(fig.layout.xaxis2.ticktext) == ["&lt;s&gt;", "Ġcat"] and filler.customdata[0][0] == "&lt;s&gt;"
    assert not _raw(row[0] for trace in fig.data for row in trace.customdata)
    assert not _raw(fig.layout.xaxis.ticktext) and not _raw(fig.layout.xaxis2.ticktext)
