"""No cut-off text (issue 36), in a real browser (chromium, Playwright): on every tab, at 1,366 and 390 px wide, in
the light and the dark theme, no text box's placeholder is wider than the box (a one-line input's placeholder
measured with a canvas ``measureText`` in the box's own font against its inner width; a text area's, its words
wrapped, in more lines than the area shows), no table header or cell hides part of its text (an element that hides
overflow or ends in an ellipsis whose ``scrollWidth`` exceeds its ``clientWidth`` by more than a pixel), and no
examples table is wider than its box. Data tables (the outputs) may scroll sideways inside their own box at phone
width, header and all: their text is whole, one swipe away.

One app, one page: each tab's first example is run once (the tables it fills are checked too), then the page is
measured in the four looks by resizing the viewport and switching Gradio's ``dark`` class (what ``?__theme=dark``
sets), without reloading. A failure lists every cut-off text with its look and tab."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from explorer.tab_registry import TABS
from support.browser_helpers import TIMEOUT_MS, open_tab, run_first_example, served_app

WIDTHS = (1366, 390)
THEMES = ("light", "dark")
SETTLE_MS = 250            # a resized page's layout (Gradio's columns stack under ~640 px) before measuring

# Every cut-off text on the page's visible elements, as [kind, text, needed px, room px].
CLIPPED = """() => {
  const out = [];
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  const ctx = document.createElement("canvas").getContext("2d");
  const px = (v) => parseFloat(v) || 0;
  for (const e of document.querySelectorAll("input[placeholder], textarea[placeholder]")) {
    if (!shown(e) || !e.placeholder || e.value || e.type === "hidden") continue;
    const st = getComputedStyle(e);
    ctx.font = `${st.fontStyle} ${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
    const room = e.clientWidth - px(st.paddingLeft) - px(st.paddingRight);
    if (e.tagName === "INPUT") {
      const need = ctx.measureText(e.placeholder).width;
      if (need > room + 1) out.push(["placeholder", e.placeholder, Math.round(need), Math.round(room)]);
      continue;
    }
    let lines = 0;
    for (const paragraph of e.placeholder.split("\\n")) {
      let line = "";
      lines += 1;
      for (const word of paragraph.split(" ")) {
        const longer = line ? line + " " + word : word;
        if (line && ctx.measureText(longer).width > room) { lines += 1; line = word; } else line = longer;
      }
    }
    const lineHeight = px(st.lineHeight) || px(st.fontSize) * 1.5;
    const rows = Math.round((e.clientHeight - px(st.paddingTop) - px(st.paddingBottom)) / lineHeight);
    if (lines > rows) out.push(["placeholder lines", e.placeholder, lines, rows]);
  }
  for (const cell of document.querySelectorAll("th, td, .body-cell")) {      // a gr.Dataframe's cells are divs
    if (!shown(cell)) continue;
    for (const e of [cell, ...cell.querySelectorAll("*")]) {
      if (!shown(e) || !(e.innerText || "").trim()) continue;
      const st = getComputedStyle(e);
      const hides = ["hidden", "clip"].includes(st.overflowX) || st.textOverflow === "ellipsis";
      if (hides && e.scrollWidth > e.clientWidth + 1)
        out.push([cell.tagName === "TH" ? "header" : "cell", e.innerText.trim().slice(0, 60), e.scrollWidth,
                  e.clientWidth]);
    }
  }
  for (const wrap of document.querySelectorAll(".table-wrap")) {          // gr.Examples' tables (rows .tr-body)
    const table = wrap.querySelector("table");
    if (shown(wrap) && table && table.querySelector("tr.tr-body") && table.scrollWidth > wrap.clientWidth + 1)
      out.push(["examples table", (table.innerText || "").trim().slice(0, 60), table.scrollWidth, wrap.clientWidth]);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def page(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    """The app, served once, in one page; its model loaded."""
    with served_app(tmp_path_factory.mktemp("clipped-runs")) as (url, _):
        opened = browser.new_page(viewport={"width": WIDTHS[0], "height": 900})
        opened.set_default_timeout(TIMEOUT_MS)
        opened.goto(url)
        expect(opened.locator(".model-info").last).to_contain_text("Heads:")
        yield opened
        opened.close()


def cut_off_texts(page: Page) -> list[str]:
    """Every cut-off text of the page in each look, named by look."""
    found = []
    for theme in THEMES:
        page.evaluate("(dark) => document.body.classList.toggle('dark', dark)", theme == "dark")
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_timeout(SETTLE_MS)
            found += [f"{width} px {theme}: {kind} {text!r} needs {need}, has {room}"
                      for kind, text, need, room in page.evaluate(CLIPPED)]
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    return found


@pytest.mark.parametrize("tab", [tab.title for tab in TABS])
def test_no_text_is_cut_off(page: Page, tab: str) -> None:
    panel = open_tab(page, tab)
    examples = panel.locator("tr.tr-body")
    if examples.count():                      # the tables its first example fills are checked too
        run_first_example(panel)
        page.wait_for_timeout(1000)           # the event has started (its progress shows) ...
        expect(page.locator(".progress-text, .eta-bar")).to_have_count(0)      # ... and every output is drawn
        page.wait_for_timeout(500)
    assert cut_off_texts(page) == [], tab
