"""The app shell in a real browser (chromium, Playwright): Ctrl+Enter (and Cmd+Enter) in a text box runs the tab's
main action once, plain Enter in a one-line box with no submit event of its own runs it too; at phone width
(390 × 844) every tab is a tap away (the tab bar wraps, no "•••" menu) and no Plotly toolbar sits on a figure's
text; at desktop width a figure's panel label does not cover its title or legend; a dotted glossary word has its
sentence as a tooltip and, clicked, opens the Glossary tab at its entry. Screenshots: ``test-artifacts/phone-*.png``.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from explorer.glossary import GLOSSARY, entry
from explorer.tab_registry import TABS
from support.browser_helpers import (ARTIFACTS, PLOT, TIMEOUT_MS, no_error_toast, open_tab, run_first_example,
                                     served_app)

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1360, "height": 1000}
# The text a figure draws that a panel label or a toolbar could cover: its title, legend, axis titles, notes.
FIGURE_TEXT = ".gtitle, .legend text, .g-xtitle text, .g-ytitle text, .annotation-text"

BOXES = """(plot, textSelector) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const shown = (e) => e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden"
                       && getComputedStyle(e).display !== "none" && Number(getComputedStyle(e).opacity) > 0;
  const label = plot.closest(".block").querySelector(":scope > label[data-testid=block-label]");
  const modebar = plot.querySelector(".modebar-container");
  return {
    label: shown(label) ? [label.innerText.trim(), box(label)] : null,
    modebar: shown(modebar) && shown(modebar.querySelector(".modebar")) ? box(modebar.querySelector(".modebar")) : null,
    texts: [...plot.querySelectorAll(textSelector)].filter(shown).map((t) => [t.textContent, box(t)]),
  };
}"""


def overlap(a: list[float], b: list[float]) -> bool:
    """Whether two boxes (left, top, right, bottom) share any area."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_app(tmp_path_factory.mktemp("keys-runs")) as (address, _):
        yield address


@contextlib.contextmanager
def opened_page(browser: Browser, url: str, viewport: dict[str, int], theme: str = "light") -> Iterator[Page]:
    """A new page on the app, its model loaded, with a log of the events it sends to the queue (``page.events``:
    their fn_index, in order; :func:`sent` names them)."""
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(TIMEOUT_MS)
    events: list[Any] = []
    page.events = events  # type: ignore[attr-defined]

    def on_request(request: Any) -> None:
        if request.method == "POST" and "/queue/join" in request.url:
            events.append(json.loads(request.post_data or "{}").get("fn_index"))
    page.on("request", on_request)
    page.goto(url + ("?__theme=dark" if theme == "dark" else ""))
    expect(page.locator(".model-info").last).to_contain_text("Heads:")
    page.theme = theme  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        page.close()


def sent(page: Page, since: int, action: str) -> list[str]:
    """The runs of ``action`` (its button's event ``action`` or its box's ``action_submit``) that ``page`` sent to
    the server, from its ``since``-th event on (timers and follow-up events are left out)."""
    names = page.evaluate("() => Object.fromEntries(window.gradio_config.dependencies.map(d => [d.id, d.api_name]))")
    sent_names = [names.get(str(index), str(index)) for index in page.events[since:]]  # type: ignore[attr-defined]
    return [name for name in sent_names if name in (action, f"{action}_submit")]


def close_toasts(page: Page) -> None:
    """Close every toast showing."""
    for close in page.locator(".toast-close").all():
        close.click()


def on_screen(tab: Any) -> None:
    """``tab`` is shown within the phone's width (a tap away: not in a menu, not off to the side)."""
    expect(tab).to_be_visible()
    box = tab.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box


def shot(page: Page, name: str, full_page: bool = True) -> None:
    """A screenshot in ``test-artifacts/phone-<name>-<theme>.png``."""
    page.wait_for_timeout(300)
    theme = page.theme  # type: ignore[attr-defined]
    page.screenshot(path=str(ARTIFACTS / f"phone-{name}-{theme}.png"), full_page=full_page)


def test_ctrl_enter_runs_the_tab_and_enter_a_one_line_box(browser: Browser, served: str) -> None:
    with opened_page(browser, served, DESKTOP) as page:
        panel = open_tab(page, "Tokenize")
        box = panel.get_by_label("Text", exact=True)
        box.fill("Keyboardists unwrap shortcuts")
        before = len(page.events)  # type: ignore[attr-defined]
        box.press("Control+Enter")
        expect(panel.locator(".wp-strip")).to_contain_text("##")
        expect(box).to_have_value("Keyboardists unwrap shortcuts")                 # no newline typed
        page.wait_for_timeout(500)
        assert sent(page, before, "tokenize") == ["tokenize"]              # once, as the button does

        panel = open_tab(page, "Fill-mask")
        box = panel.get_by_label("Text with [MASK] tokens")
        box.fill("The capital of France is [MASK].")
        before = len(page.events)  # type: ignore[attr-defined]
        box.press("Meta+Enter")
        expect(panel.locator(f"{PLOT} .barlayer").first).to_be_visible()
        page.wait_for_timeout(500)
        assert sent(page, before, "fill_mask") == ["fill_mask"]
        # Targets is one line with no submit event of its own: Enter there runs Fill too.
        before = len(page.events)  # type: ignore[attr-defined]
        panel.get_by_label("Targets (optional)").fill("paris, london")
        panel.get_by_label("Targets (optional)").press("Enter")
        expect(panel.locator(PLOT).first).to_contain_text("london")
        page.wait_for_timeout(500)
        assert sent(page, before, "fill_mask") == ["fill_mask"]
        # A section with its own button (Embeddings' corpus neighbours, an accordion): Ctrl+Enter in its sentence box
        # runs that button ("Find neighbours"), not the tab's "Show embeddings".
        panel = open_tab(page, "Embeddings")
        panel.get_by_text("Nearest contextual neighbours in a corpus").click()
        sentence = panel.get_by_label("Sentence", exact=True)
        sentence.fill("We sat on the grassy bank of the river.")
        before = len(page.events)  # type: ignore[attr-defined]
        sentence.press("Control+Enter")
        page.wait_for_timeout(1500)
        assert sent(page, before, "neighbours") == ["neighbours"] and sent(page, before, "embeddings") == []
        close_toasts(page)                                 # no index built yet: the search says so
        # QA's question is one line with a submit event: Ctrl+Enter runs the button once (Gradio's own submit of
        # that box stays quiet), plain Enter is left to Gradio (its submit, once).
        panel = open_tab(page, "QA")
        question = panel.get_by_label("Question")
        question.fill("Who was Jim Henson?")
        panel.get_by_label("Context").fill("Jim Henson was a nice puppet.")
        for key, expected in (("Control+Enter", ["answer"]), ("Enter", ["answer_submit"])):
            before = len(page.events)  # type: ignore[attr-defined]
            question.press(key)
            expect(panel).to_contain_text("Best answer")
            page.wait_for_timeout(1500)
            assert sent(page, before, "answer") == expected, key
        no_error_toast(page)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_tab_is_a_tap_away_at_phone_width(browser: Browser, served: str, theme: str) -> None:
    with opened_page(browser, served, PHONE, theme) as page:
        expect(page.locator(".overflow-menu:visible")).to_have_count(0)            # no "•••" menu
        tablist = page.locator("#main-tabs [role=tablist]").first
        for tab in TABS:
            on_screen(tablist.get_by_role("tab", name=tab.title, exact=True))
        shot(page, "tabs")
        for tab in reversed(TABS):
            tablist.get_by_role("tab", name=tab.title, exact=True).click()
            expect(tablist.get_by_role("tab", name=tab.title, exact=True)).to_have_attribute("aria-selected", "true")
        panel = open_tab(page, "Heads")                                             # a tab with inner tabs
        for inner in ("Next sentence", "Classify", "Tag words", "Choose"):
            on_screen(panel.get_by_role("tab", name=inner, exact=True))
        expect(page.locator(".overflow-menu:visible")).to_have_count(0)

        panel = open_tab(page, "Tokenize")
        run_first_example(panel)
        plot = panel.locator(PLOT).first
        expect(plot.locator(".barlayer")).to_be_visible()
        plot.hover()                                                                 # a toolbar shows on hover
        page.wait_for_timeout(300)
        boxes = plot.evaluate(BOXES, FIGURE_TEXT)
        covered = [text for text, box in boxes["texts"] if boxes["modebar"] and overlap(boxes["modebar"], box)]
        assert covered == [], f"the Plotly toolbar covers {covered}"
        shot(page, "tokenize")


def test_a_plot_label_does_not_cover_the_figure_title(browser: Browser, served: str) -> None:
    with opened_page(browser, served, DESKTOP) as page:
        for name in ("Tokenize", "QA"):
            panel = open_tab(page, name)
            run_first_example(panel)
            expect(panel.locator(f"{PLOT} .main-svg").first).to_be_visible()
            page.wait_for_timeout(500)
            for plot in panel.locator(PLOT).all():
                boxes = plot.evaluate(BOXES, FIGURE_TEXT)
                assert boxes["label"] is not None and boxes["texts"], (name, boxes)
                label, label_box = boxes["label"]
                covered = [text for text, box in boxes["texts"] if overlap(label_box, box)]
                assert covered == [], f"{name}: the label {label!r} covers {covered}"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_glossary_word_explains_itself_and_opens_its_entry(browser: Browser, served: str, theme: str) -> None:
    with opened_page(browser, served, PHONE, theme) as page:
        word = page.locator("#app-header .gloss").first
        expect(word).to_have_attribute("title", entry("WordPiece").meaning)
        style = word.evaluate("(w) => { const s = getComputedStyle(w); return [s.textDecorationStyle, s.cursor]; }")
        assert style == ["dotted", "help"]
        expect(word).to_have_attribute("tabindex", "0")                     # reachable with Tab
        word.focus()
        word.press("Enter")                                                # the keyboard opens it as a click does
        expect(page.get_by_role("tab", name="Glossary", exact=True)).to_have_attribute("aria-selected", "true")
        page.get_by_role("tab", name="Tokenize", exact=True).click()
        word.click()
        expect(page.get_by_role("tab", name="Glossary", exact=True)).to_have_attribute("aria-selected", "true")
        target = page.locator(f"#{entry('WordPiece').anchor}")
        expect(target).to_be_attached()
        expect(target.locator("xpath=..")).to_be_in_viewport()
        expect(page.locator("#glossary a[id^=gloss-]")).to_have_count(len(GLOSSARY))
        expect(page.locator("#glossary")).to_contain_text("How layers are numbered")
        shot(page, "glossary", full_page=False)                                     # the entry, as it is shown
