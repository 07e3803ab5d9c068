"""Every canvas view exports what it draws (docs/design/browser-views.md, *Export*), in chromium: *SVG* writes a
vector file (``assets/svg_context.js``: each line a ``<path>``, labels as ``<text>``, a heat grid one ``<image>``)
whose ``<title>`` names the model, the input and the view; *PNG 2x* / *PNG 3x* a picture of 2 or 3 times the view's
CSS size, its cells the drawn colours; the files are named ``bert-explorer_<model>_<first words>_<view>_...``. On the
bundled default model: the Attention tab's heatmap, head view (one ``<path>`` per drawn link, every token label as
``<text>``) and model view, the neuron view, the Embeddings maps; on a page of their own, the live curves and the SVG
context itself (an SVG drawn beside a canvas renders as the canvas does)."""
from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from engine.probes.inference import attention
from explorer.attention.sections import EXAMPLES
from explorer.embeddings.sections import EXAMPLES as EMBEDDINGS_EXAMPLES
from explorer.runs.curves import curve_points
from explorer.runs.curves_view import CURVES_SCRIPT, CURVES_TEMPLATE
from explorer.views import browser_arrays
from explorer.views.canvas_view import SVG, TOOLS
from explorer.views.export_names import export_info, safe
from support.browser_helpers import no_error_toast, open_tab, run_first_example, saved

NS = "{http://www.w3.org/2000/svg}"
NAME = re.compile(r"^[A-Za-z0-9_-]+\.(svg|png)$")


def exported(page: Page, root, canvas, stem: str, view: str, scale: int = 2) -> tuple[ET.Element, np.ndarray, str]:
    """The view's SVG (parsed: it must be XML), its PNG at ``scale`` (RGB) and the file name; checks the names, the
    title (the model, the input, ``view``) and the sizes against the canvas's CSS size."""
    name, data = saved(page, root.locator(".view-export-button[data-export=svg]").first)
    svg = ET.fromstring(data)
    assert NAME.match(name) and name.startswith(f"{stem}_") and name.endswith(".svg"), name
    heading = svg.find(f"{NS}title").text
    assert "model: default" in heading and view in heading, heading
    width, height = canvas.evaluate("c => [parseFloat(c.style.width), parseFloat(c.style.height)]")
    assert abs(float(svg.get("width")) - width) < 0.01 and abs(float(svg.get("height")) - height) < 0.01
    png_name, png = saved(page, root.locator(f".view-export-button[data-export=png{scale}]").first)
    assert png_name == name[:-4] + ".png"
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert abs(picture.shape[1] - scale * width) <= 1 and abs(picture.shape[0] - scale * height) <= 1, picture.shape
    return svg, picture, name


def texts(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{NS}text")]


def short(text: str, n: int) -> str:
    """assets/canvas_tools.js's ``short``: a label cut to ``n`` characters with an ellipsis."""
    return text if len(text) <= n else text[:n - 1] + "…"


def test_every_attention_view_and_the_neuron_view_export_svg_and_png(desktop: Page, default_model) -> None:
    page = desktop
    panel = open_tab(page, "Attention")
    run_first_example(panel)                                  # "The cat sat on the mat because it was tired."
    text, pair = EXAMPLES[0]
    stem = export_info(default_model.source, text, pair or None)["stem"]
    assert stem == "bert-explorer_default_the-cat-sat-on-the-mat"
    result = attention(default_model, text, pair or None, 128)
    n = len(result.tokens)
    heat, heads, grid = (panel.locator(f".attention-{kind} .attn-view").first
                         for kind in ("heatmap", "head-view", "model-view"))
    expect(heat).to_have_attribute("data-drawn", "L1-H0")
    expect(heads).to_have_attribute("data-drawn", "L1-H0-0")
    expect(grid).to_have_attribute("data-drawn", "L1-H0")

    svg, png, name = exported(page, heat, heat.locator("canvas"), stem, "attention heatmap, layer 1, head 0", scale=3)
    assert name == f"{stem}_attention-heatmap_L1H0.svg"
    assert len(list(svg.iter(f"{NS}image"))) == 1                              # the S x S grid: one picture
    labels = [short(f"{i}: {t}", 14) for i, t in enumerate(result.tokens)]
    assert sorted(texts(svg)) == sorted(labels * 2)                           # rows and (rotated) columns
    assert sum("rotate" in (t.get("transform") or "") or "matrix" in (t.get("transform") or "")
               for t in svg.iter(f"{NS}text")) == n
    geometry = page.evaluate("() => window.BertAttentionViews.views.find(v => v.kind === 'heatmap').geometry")
    palette = [[int(c[k:k + 2], 16) for k in (1, 3, 5)] for c in
               page.evaluate("() => Object.values(window.BertAttentionViews.store.entries)[0].palette")]
    levels = np.rint(result.attentions[0, 0] * 255).astype(int)              # uint8 with scale 1.0
    for i, j in [(0, 0), (3, 5), (n - 1, 2)]:                                  # a 3x pixel is the drawn cell's colour
        x = int(3 * (geometry["left"] + (j + 0.5) * geometry["cell"]))
        y = int(3 * (geometry["top"] + (i + 0.5) * geometry["cell"]))
        assert png[y, x].tolist() == palette[levels[i, j]], (i, j)

    svg, _, name = exported(page, heads, heads.locator("canvas"), stem, "head view, layer 1")
    assert name == f"{stem}_head-view_L1H0.svg"
    shown = [int(c.get_attribute("data-head")) for c in heads.locator(".attn-chip[aria-pressed=true]").all()]
    drawn = sum(int((np.rint(result.attentions[0, h] * 255) / 255 >= 0.02).sum()) for h in shown)
    paths = list(svg.iter(f"{NS}path"))
    assert len(paths) == drawn == int(heads.get_attribute("data-links")) > 0   # one path per drawn link
    assert all(re.fullmatch(r"M[\d. -]+L[\d. -]+", p.get("d")) for p in paths)   # each a straight line
    for token in result.tokens:                                               # each label, query and key side
        assert texts(svg).count(short(token, 16)) >= 2, token
    heads.locator(".view-export-button[data-export=svg]").focus()             # the keyboard reaches it
    with page.expect_download() as download:
        page.keyboard.press("Enter")
    assert download.value.suggested_filename == name

    svg, _, name = exported(page, grid, grid.locator("canvas"), stem, "model view")
    assert name == f"{stem}_model-view_L1H0.svg"
    L, H = result.num_layers, result.num_heads
    assert len(list(svg.iter(f"{NS}image"))) == 1 and len(list(svg.iter(f"{NS}use"))) == L * H   # one picture, tiled
    assert {f"L{l + 1}" for l in range(L)} <= set(texts(svg)) and len(list(svg.iter(f"{NS}rect"))) >= 2  # + frame

    panel.get_by_text("Neuron view: the numbers behind one row of the heatmap").click()
    panel.get_by_role("button", name="Show the neuron view").click()
    neuron = panel.locator(".neuron-canvas-view .neuron-view").first
    expect(neuron).to_have_attribute("data-drawn", "L1-H0-Q0-0")
    svg, _, name = exported(page, neuron, neuron.locator("canvas"), stem, "neuron view, layer 1, head 0, query 0")
    assert name == f"{stem}_neuron-view_L1H0Q0.svg"
    assert len(list(svg.iter(f"{NS}image"))) == 3                             # q, every k, q ⊙ k
    assert {"q ⊙ k_j", "softmax"} <= set(texts(svg)) and f"3: {result.tokens[3]}" in texts(svg)
    no_error_toast(page)


def test_the_embeddings_maps_export_svg_and_png(desktop: Page, default_model) -> None:
    page = desktop
    panel = open_tab(page, "Embeddings")
    run_first_example(panel)
    text, pair = EMBEDDINGS_EXAMPLES[0]
    stem = export_info(default_model.source, text, pair or None)["stem"]
    dims, sims = (panel.locator(f".embeddings-{kind} .emb-view").first for kind in ("dimensions", "similarity"))
    expect(dims).to_have_attribute("data-drawn", "output")
    expect(sims).to_have_attribute("data-drawn", "cosine")
    svg, _, name = exported(page, dims, dims.locator("canvas"), stem, "Hidden dimensions")
    assert name == f"{stem}_embeddings-dimensions_output.svg"
    assert len(list(svg.iter(f"{NS}image"))) == 1 and len(list(svg.iter(f"{NS}rect"))) >= 256   # map + colour scale
    assert "0: [CLS]" in texts(svg)
    svg, _, name = exported(page, sims, sims.locator("canvas"), stem, "Cosine similarity of the first")
    assert name == f"{stem}_embeddings-position-similarity.svg"               # the input of the page it was shown on
    assert "input: Who was Jim Henson?" in svg.find(f"{NS}title").text
    no_error_toast(page)


@pytest.fixture()
def blank(browser: Browser) -> Iterator[Page]:
    """A page with the SVG context and the drawing tools, and nothing else."""
    page = browser.new_page(accept_downloads=True, viewport={"width": 900, "height": 700})
    page.set_content("<html><body style='margin:0;font-family:sans-serif'></body></html>")
    page.add_script_tag(content=browser_arrays.script())
    for path in (SVG, TOOLS):
        page.add_script_tag(content=path.read_text(encoding="utf-8"))
    yield page
    page.close()


SHAPES = """(surface) => {                      // lines, curves, arcs, rects, a clip, alpha, a dash, a picture
  const ctx = surface(240, 160);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, 240, 160);
  ctx.lineWidth = 3; ctx.strokeStyle = "rgba(220, 38, 38, 0.8)";
  ctx.beginPath(); ctx.moveTo(10, 10); ctx.lineTo(100, 60); ctx.quadraticCurveTo(150, 0, 200, 40);
  ctx.bezierCurveTo(220, 80, 160, 120, 120, 90); ctx.stroke();
  ctx.fillStyle = "#2563eb"; ctx.beginPath(); ctx.arc(60, 110, 30, 0.3, 2.2 * Math.PI / 2, false); ctx.closePath(); ctx.fill();
  ctx.beginPath(); ctx.arc(180, 120, 20, 0, 2 * Math.PI); ctx.fill();
  ctx.save(); ctx.translate(120, 80); ctx.rotate(0.5); ctx.scale(2, 1); ctx.globalAlpha = 0.5;
  ctx.fillStyle = "green"; ctx.fillRect(-10, -10, 20, 10); ctx.strokeStyle = "black"; ctx.lineWidth = 1;
  ctx.strokeRect(-12, -12, 24, 14); ctx.restore();
  ctx.save(); ctx.beginPath(); ctx.rect(150, 0, 60, 50); ctx.clip();
  ctx.setLineDash([4, 2]); ctx.lineWidth = 4; ctx.strokeStyle = "#111827";
  ctx.beginPath(); ctx.moveTo(140, 25); ctx.lineTo(235, 25); ctx.stroke(); ctx.restore();
  const pic = window.BertCanvas.picture(4, 4, (r, c) => [r * 60, c * 60, 128]);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(pic, 8, 130, 32, 24);
  ctx.drawImage(pic, 2, 0, 2, 2, 200, 140, 16, 16);
}"""


def test_the_svg_context_renders_as_the_canvas_draws(blank: Page) -> None:
    """The same draw function on a canvas and on the SVG context: the SVG, rendered by chromium, is the canvas's
    picture (anti-aliased edges aside), and its elements are what the issue names."""
    result = blank.evaluate("""async (shapes) => {
      const draw = eval(shapes);
      const canvas = Object.assign(document.createElement("canvas"), { width: 240, height: 160 });
      draw(() => canvas.getContext("2d"));
      const text = window.BertCanvas.svgOf(draw, "shapes", "#ffffff");
      const img = new Image();
      img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
      await img.decode();
      const again = Object.assign(document.createElement("canvas"), { width: 240, height: 160 });
      again.getContext("2d").drawImage(img, 0, 0);
      const a = canvas.getContext("2d").getImageData(0, 0, 240, 160).data;
      const b = again.getContext("2d").getImageData(0, 0, 240, 160).data;
      let far = 0, total = 0;
      for (let i = 0; i < a.length; i += 4) {
        const d = Math.max(...[0, 1, 2].map((k) => Math.abs(a[i + k] - b[i + k])));
        total += d; if (d > 64) far += 1;
      }
      return { text, mean: total / (a.length / 4), far };
    }""", SHAPES)
    svg = ET.fromstring(result["text"].encode())
    assert result["mean"] < 0.5 and result["far"] < 60, (result["mean"], result["far"])   # measured: 0.11, 3
    assert svg.find(f"{NS}title").text == "shapes"
    assert len(svg.findall(f"{NS}path")) == 4 and len(list(svg.iter(f"{NS}clipPath"))) == 1   # + the clip's path
    assert len(list(svg.iter(f"{NS}image"))) == 1 and len(list(svg.iter(f"{NS}use"))) == 2   # one picture, twice


def test_text_is_text_escaped_aligned_and_turned(blank: Page) -> None:
    text = blank.evaluate("""() => window.BertCanvas.svgOf((surface) => {
      const ctx = surface(200, 100);
      ctx.font = "bold 12px sans-serif"; ctx.fillStyle = "#123456";
      ctx.textAlign = "right"; ctx.textBaseline = "middle"; ctx.fillText("a<b & \\"c\\"\\u0001", 100, 20);
      ctx.textAlign = "center"; ctx.textBaseline = "top"; ctx.fillText("##ing", 50, 50);
      ctx.save(); ctx.translate(150, 90); ctx.rotate(-Math.PI / 2); ctx.textAlign = "left"; ctx.fillText("up", 0, 0);
      ctx.restore(); ctx.fillStyle = "var(--not-a-colour)"; ctx.fillText("kept", 10, 90);
      return true;
    }, "<title> & more", null)""")
    svg = ET.fromstring(text.encode())
    assert svg.find(f"{NS}title").text == "<title> & more"
    first, second, turned, kept = svg.iter(f"{NS}text")
    assert first.text == 'a<b & "c"\ufffd' and first.get("text-anchor") == "end"
    assert first.get("dominant-baseline") == "central" and "bold 12px" in first.get("style")
    assert second.get("text-anchor") == "middle" and second.get("dominant-baseline") == "text-before-edge"
    assert turned.text == "up" and turned.get("transform") == "matrix(0 -1 1 0 150 90)"
    assert kept.get("fill") == "#123456"                                      # an invalid colour is ignored


def test_the_page_names_files_as_python_does(blank: Page) -> None:
    parts = ["MLM loss", "Café naïve — «x»", "../../etc/passwd", "__a__b--c__", "日本語", "L3H5", "ẞ ﬁ ①"]
    assert blank.evaluate("(parts) => parts.map(window.BertCanvas.safe)", parts) == [safe(p) for p in parts]
    stem = export_info("hub owner/Name", "Who was Jim Henson?")
    name = blank.evaluate("(info) => window.BertCanvas.fileName(info, 'head view', 'L3H5', '')", stem)
    assert name == "bert-explorer_hub-owner-Name_who-was-jim-henson_head-view_L3H5"
    assert len(blank.evaluate("() => window.BertCanvas.fileName(null, 'x'.repeat(500))")) <= 160


def test_the_live_curves_export_each_chart(blank: Page) -> None:
    records = [{"kind": "train", "step": s, "mlm_loss": 6 - s / 50, "lr": 1e-4} for s in range(1, 101)]
    value = curve_points(records, 0, 3, len(records), reset=True)
    blank.set_content(f"<html><body style='margin:0'><div id='view'>{CURVES_TEMPLATE}</div></body></html>")
    for path in (SVG, TOOLS, CURVES_SCRIPT):
        blank.add_script_tag(content=path.read_text(encoding="utf-8"))
    blank.evaluate("""(value) => window.BertCurves.mount(document.getElementById("view"), { value },
        () => {}, () => {})""", value)
    chart = blank.locator(".curves-chart").first
    expect(blank.locator(".curves-view")).to_have_attribute("data-draws", re.compile("[1-9]"))
    name, data = saved(blank, chart.locator(".view-export-button[data-export=svg]"))
    assert name == "bert-explorer_training-curves_MLM-loss_run3.svg"
    svg = ET.fromstring(data)
    assert svg.find(f"{NS}title").text == "BERT Explorer: training curves, MLM loss by step (run 3)"
    assert len(list(svg.iter(f"{NS}clipPath"))) == 1 and texts(svg)           # the plot area's clip, tick labels
    longest = max(len(p.get("d")) for p in svg.iter(f"{NS}path"))
    assert longest > 100 * 8                                                  # a curve: one path of 100 points
    width, height = chart.locator("canvas").evaluate("c => [parseFloat(c.style.width), parseFloat(c.style.height)]")
    _, png = saved(blank, chart.locator(".view-export-button[data-export=png2]"))
    assert Image.open(io.BytesIO(png)).size == (round(2 * width), round(2 * height))
