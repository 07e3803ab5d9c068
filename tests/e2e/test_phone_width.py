"""Readable at a phone's width (390 px), in a real browser (chromium, Playwright): the Syntax tab's heatmaps and
layer-probe chart, its best-head table, and the Attention tab's *Statistic per head*.

A figure's text never overlaps: no two of its SVG texts (title, axis titles, tick labels, colour-bar labels,
legend entries, the values printed in heatmap cells) share any area. Nothing of it is cut: each text lies inside
its figure, and the figure inside what its block can scroll to (a grid sized by its cells is wider than a phone
and scrolls sideways in its block; explorer/syntax/plots.py, assets/style.css). A table header breaks between
words, never inside one ("accu-racy"), and the example sentences are whole and within the table's scroll.
Screenshots: ``test-artifacts/phone-width-*.png``."""
from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from explorer.syntax.links import EXAMPLE_COLUMN
from support.browser_helpers import ARTIFACTS, PHONE, PLOT, no_error_toast, open_tab, opened, run_first_example

SENTENCES = 40                  # the first 40 sentences of the bundled sample: a few seconds on 2 cores
SLACK = 1                       # px: sub-pixel rounding of text boxes
MIN_FONT_PX = 9                 # smaller type is not read on a phone (Plotly shrinks cell values to fit a squeezed grid)

# A figure's texts (with their type size), its SVG's box and what its nearest sideways scroller can show (its whole
# scroll width, down to its scroll bar).
FIGURE_TEXTS = """(plot) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden"
                       && getComputedStyle(e).display !== "none" && (e.textContent || "").trim() !== "";
  const selector = [".gtitle", ".g-xtitle text", ".g-ytitle text", ".g-x2title text", ".g-y2title text", ".xtick text",
                    ".ytick text", ".x2tick text", ".y2tick text", ".cbtitle text", ".cbaxis text", ".heatmaplayer text",
                    ".legendtext", ".annotation-text"].join(", ");
  let scroller = plot.parentElement;
  while (scroller && !["auto", "scroll"].includes(getComputedStyle(scroller).overflowX)) scroller = scroller.parentElement;
  const host = scroller || plot.parentElement;
  const room = box(host);
  room[2] = room[0] - host.scrollLeft + host.scrollWidth;                  // as far right as a swipe reaches
  room[3] = room[1] + host.clientTop + host.clientHeight;                  // above its scroll bar, if it has one
  return {svg: box(plot.querySelector(".main-svg")), room,
          texts: [...plot.querySelectorAll(selector)].filter(shown).map((t) => [t.textContent.trim(), box(t),
                                                                            parseFloat(getComputedStyle(t).fontSize)])};
}"""

# Every header word drawn on more than one line ([header, word]): a word cut by a line break has two line boxes.
BROKEN_HEADER_WORDS = """(table) => {
  const broken = [];
  for (const header of table.querySelectorAll("[role=columnheader] .header")) {
    const walker = document.createTreeWalker(header, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push([header.innerText.trim(), word[0]]);
      }
    }
  }
  return broken;
}"""

# The cells of column ``col`` as [text, cut sideways, cut below, right edge past the table's scroll].
COLUMN_CELLS = """(table, col) => {
  const wrap = table.querySelector(".table-wrap") || table;
  let scroller = wrap;
  for (const e of [wrap, ...wrap.querySelectorAll("*")])
    if (["auto", "scroll"].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth) { scroller = e; break; }
  const reach = scroller.getBoundingClientRect().left - scroller.scrollLeft + scroller.scrollWidth;
  return [...table.querySelectorAll(`[role=gridcell][data-col="${col}"]`)].map((cell) => {
    const text = cell.querySelector(".text") || cell;
    return [text.innerText.trim(), text.scrollWidth > text.clientWidth + 1, cell.scrollHeight > cell.clientHeight + 1,
            cell.getBoundingClientRect().right > reach + 1];
  });
}"""


def overlap(a: list[float], b: list[float]) -> bool:
    """Whether two boxes (left, top, right, bottom) share more than the rounding of a pixel."""
    return a[0] < b[2] - SLACK and b[0] < a[2] - SLACK and a[1] < b[3] - SLACK and b[1] < a[3] - SLACK


def unreadable(plot: Locator) -> list[str]:
    """What is wrong with one drawn figure's text at this width: overlapping pairs, type too small to read, texts
    cut by the figure's edges, a figure wider than its block can scroll to."""
    found = plot.evaluate(FIGURE_TEXTS)
    svg, room, texts = found["svg"], found["room"], found["texts"]
    assert texts, "the figure draws no text"
    problems = [f"{a!r} overlaps {b!r}" for i, (a, box_a, _) in enumerate(texts) for b, box_b, _ in texts[i + 1:]
                if overlap(box_a, box_b)]
    problems += [f"{text!r} is {size} px" for text, _, size in texts if size < MIN_FONT_PX]
    problems += [f"{text!r} is cut by the figure's edge {box} / {svg}" for text, box, _ in texts
                 if box[0] < svg[0] - SLACK or box[2] > svg[2] + SLACK or box[1] < svg[1] - SLACK
                 or box[3] > svg[3] + SLACK]
    if svg[0] < room[0] - SLACK or svg[2] > room[2] + SLACK or svg[3] > room[3] + SLACK:
        problems.append(f"the figure {svg} reaches past what its block shows or scrolls to {room}")
    return problems


def figure(panel: Locator, label: str) -> Locator:
    """The drawn figure of the gr.Plot labelled ``label``."""
    label_of = panel.page.locator("label[data-testid=block-label]", has_text=label)
    return panel.locator(".block", has=label_of).locator(f":scope > {PLOT}").first


def shot(page: Page, name: str) -> None:
    """A screenshot of the whole page in ``test-artifacts/phone-width-<name>.png``."""
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"phone-width-{name}.png"), full_page=True)


@pytest.fixture
def phone(browser: Browser, app_served) -> Iterator[Page]:
    """A light page on the served app, 390 px wide."""
    with opened(browser, app_served.url, PHONE) as page:
        yield page


def test_the_syntax_heads_and_their_table_read_at_phone_width(phone: Page) -> None:
    panel = open_tab(phone, "Syntax")
    panel.get_by_label(re.compile("^Sentences")).first.fill(str(SENTENCES))
    panel.get_by_role("button", name="Score the heads").click()
    expect(panel.get_by_role("gridcell", name="dependent → head").first).to_be_attached()
    labels = ("The chosen relation: each head's accuracy", "Every head against every relation")
    for label in labels:
        expect(figure(panel, label).locator(".heatmaplayer")).to_be_attached()
    no_error_toast(phone)
    phone.wait_for_timeout(500)                        # Plotly has laid out every text
    problems = {label: unreadable(figure(panel, label)) for label in labels}
    assert problems == {label: [] for label in labels}
    grid, overview = (figure(panel, label) for label in labels)
    assert grid.evaluate("p => p.parentElement.scrollWidth > p.parentElement.clientWidth")   # 12 heads x 36 px
    rows = int(panel.locator(".syntax-best-heads [role=grid]").first.get_attribute("aria-rowcount")) - 1
    shown = panel.locator(".syntax-best-heads [role=gridcell][data-col='0']").all_inner_texts()   # the rows drawn
    heads, relations = overview.evaluate("p => [p.querySelectorAll('.xtick text').length, "
                                         "[...p.querySelectorAll('.ytick text')].map(t => t.textContent)]")
    assert heads == 6 * 12 and len(set(relations)) == len(relations) == rows   # not squeezed: every label drawn
    assert set(shown) <= set(relations)

    table = panel.locator(".syntax-best-heads").first
    assert table.evaluate(BROKEN_HEADER_WORDS) == []
    examples = table.evaluate(COLUMN_CELLS, EXAMPLE_COLUMN)
    assert len(examples) > 10 and all(text for text, *_ in examples)
    assert [row for row in examples if any(row[1:])] == []       # whole: not cut sideways, below, nor out of reach
    assert len({text for text, *_ in examples}) == len(examples)  # a sentence of its own per relation
    shot(phone, "syntax-heads")

    panel.get_by_role("button", name=re.compile("^Probe the layers")).click()
    chart = figure(panel, "UPOS probe by layer")
    expect(chart.locator(".scatterlayer .trace").first).to_be_attached()
    no_error_toast(phone)
    phone.wait_for_timeout(500)
    assert unreadable(chart) == []


def test_the_attention_statistic_per_head_reads_at_phone_width(phone: Page) -> None:
    panel = open_tab(phone, "Attention")
    run_first_example(panel)
    stats = figure(panel, "Statistic per head")
    expect(stats.locator(".heatmaplayer")).to_be_attached()
    no_error_toast(phone)
    phone.wait_for_timeout(500)
    assert unreadable(stats) == []
    values = stats.locator(".heatmaplayer text").all_text_contents()
    assert len(values) == 6 * 12 and all(re.fullmatch(r"\d+(\.\d+)?", v) for v in values)   # the default model's heads
    table = panel.locator(".block:has(> .table-container)").filter(has_text="Head statistics").first
    assert table.evaluate(BROKEN_HEADER_WORDS) == []
    shot(phone, "attention-statistic")
