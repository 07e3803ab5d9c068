"""Every Plotly chart exports SVG and a hi-res PNG (docs/design/export.md, *SVG and hi-res PNG*), in chromium: the
page script (``assets/plot_export.js``) gives each chart drawn on the page the canvas views' "SVG", "PNG 2x" and
"PNG 3x" buttons; *SVG* saves Plotly's vector drawing of the chart (its labels as ``<text>``) with a ``<title>``
naming the model, the input and the view; *PNG 2x* a picture of twice the chart's drawn size, on white; the files
are ``bert-explorer_<model>_<first words>_<view>.svg|png``. On the bundled default model: Fill-mask's "Top-k per
mask" and Tokenize's "Segments and positions"."""
from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import numpy as np
from PIL import Image
from playwright.sync_api import Page, expect

from explorer.fill_mask.tab import EXAMPLES as FILL_EXAMPLES
from explorer.tokenize.tab import EXAMPLES as TOKENIZE_EXAMPLES
from explorer.views.export_names import export_info, safe
from support.browser_helpers import no_error_toast, open_tab, run_first_example, saved

NS = "{http://www.w3.org/2000/svg}"
NAME = re.compile(r"^[A-Za-z0-9_-]+\.(svg|png)$")


def drawn_chart(panel, label: str):
    """The Plotly chart in the block labelled ``label`` once drawn, and its export control."""
    block = panel.locator(".block").filter(has=panel.page.locator("[data-testid=block-label]", has_text=label)).last
    chart = block.locator(".js-plotly-plot").first
    expect(chart.locator(".main-svg").first).to_be_visible()
    control = block.locator(".plot-export")
    expect(control).to_have_count(1)
    expect(control.locator(".view-export-button")).to_have_text(["SVG", "PNG 2x", "PNG 3x"])
    return chart, control


def check_exports(page: Page, chart, control, text: str, view: str) -> list[str]:
    """The chart's SVG and PNG 2x: names, title, size; the SVG's texts."""
    stem = export_info("default", text)["stem"]
    name, data = saved(page, control.locator("[data-export=svg]"))
    assert NAME.match(name) and name == f"{stem}_{safe(view)}.svg", name
    svg = ET.fromstring(data)                                                # valid XML, an SVG
    assert svg.tag == f"{NS}svg"
    heading = svg.find(f"{NS}title").text
    assert heading == f"BERT Explorer: {view} · model: default · input: {text}", heading
    width, height = chart.evaluate("gd => [gd._fullLayout.width, gd._fullLayout.height]")
    assert (float(svg.get("width")), float(svg.get("height"))) == (width, height)
    png_name, png = saved(page, control.locator("[data-export=png2]"))
    assert png_name == name[:-4] + ".png"
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert picture.shape[:2] == (2 * height, 2 * width), (picture.shape, width, height)
    assert picture[2, 2].tolist() == [255, 255, 255]                         # on white, whatever the page's
    return [t.text or "" for t in svg.iter(f"{NS}text")]


def test_fill_mask_and_tokenize_charts_export_svg_and_png(desktop: Page) -> None:
    page = desktop
    panel = open_tab(page, "Fill-mask")
    run_first_example(panel)                                     # "The United [MASK] of America."
    chart, control = drawn_chart(panel, "Top-k per mask")
    expect(chart).to_have_attribute("class", re.compile("js-plotly-plot"))
    candidates = chart.evaluate("gd => gd.layout.yaxis.ticktext")
    assert len(candidates) == 5, candidates                   # top-k 5: five tokens
    texts = check_exports(page, chart, control, FILL_EXAMPLES[0][0], "Top-k per mask")
    assert all(token in texts for token in candidates), (candidates, texts)   # the tokens drawn, as text
    assert "[MASK]" in texts                                      # the chart's title

    panel = open_tab(page, "Tokenize")
    run_first_example(panel)                                     # "Tokenization splits embeddings into pieces."
    chart, control = drawn_chart(panel, "Segments and positions")
    texts = check_exports(page, chart, control, TOKENIZE_EXAMPLES[0][0], "Segments and positions")
    assert {"[CLS]", "##ization", "[SEP]", "position"} <= set(texts), texts
    run_first_example(panel)                                     # drawn again: still one control under it
    page.wait_for_timeout(500)
    expect(panel.locator(".plot-export")).to_have_count(panel.locator(".js-plotly-plot").count())
    no_error_toast(page)
