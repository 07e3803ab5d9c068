"""A link that reopens the view, in a real chromium (issue 43): on the Attention tab a person types a text, picks
a layer and a head, shows the attention and presses *Copy link*; the link (from the clipboard, and the same in the
box beside the button) opened in a fresh browser context, in the light and in the dark theme, shows the same tab,
model, text, layer and head, and the heatmap drew that head with no click. ``&embed=1`` shows the view without
the page's chrome (no header, no picker, no tab bar); a link naming a layer the model lacks says so and shows
layer 1."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from support.browser_helpers import ARTIFACTS, DESKTOP, TIMEOUT_MS, no_error_toast, open_tab

TEXT = "The trophy did not fit in the suitcase because it was too big."
LAYER, HEAD = 4, 7


def type_number(panel, elem_id: str, value: int) -> None:
    box = panel.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def heatmap(page: Page):
    return page.locator(".attention-heatmap .attn-view").first


def painted(canvas) -> int:
    """How many of the canvas's pixels are not transparent."""
    return canvas.evaluate("""c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")


def fresh_page(browser: Browser, url: str):
    """A new browser context (no storage, no cookies: as another person's browser) and a page on ``url``."""
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    return context, page


@pytest.fixture(scope="module")
def copied(browser: Browser, app_served) -> str:
    """The link *Copy link* gives on the Attention tab after a person set the text, layer and head and showed it."""
    origin = app_served.url.rstrip("/")
    context = browser.new_context(viewport=DESKTOP)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(app_served.url)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        panel = open_tab(page, "Attention")
        panel.get_by_label("Text", exact=True).fill(TEXT)
        type_number(panel, "attention-layer", LAYER)
        type_number(panel, "attention-head", HEAD)
        panel.get_by_role("button", name="Show attention").click()
        expect(heatmap(page)).to_have_attribute("data-drawn", f"L{LAYER}-H{HEAD}")
        panel.locator("#copy-link-attention").click()
        box = panel.locator("#copy-link-box-attention input, #copy-link-box-attention textarea").first
        expect(box).to_have_value(re.compile("^" + re.escape(origin) + r"/?\?tab=attention&"))   # the full address
        link = box.input_value()
        expect(panel.locator("#copy-link-attention")).to_have_attribute("data-note", "copied")
        assert page.evaluate("() => navigator.clipboard.readText()") == link
        no_error_toast(page)
        return link
    finally:
        context.close()


def test_the_copied_link_carries_the_tab_model_text_layer_and_head(copied: str) -> None:
    query = {key: values[0] for key, values in parse_qs(urlsplit(copied).query).items()}
    assert query["tab"] == "attention" and query["model"] == "default" and query["text"] == TEXT
    assert (query["layer"], query["head"]) == (str(LAYER), str(HEAD)) and "run" not in query
    assert len(urlsplit(copied).query) < 4000


@pytest.mark.parametrize("look", ["light", "dark"])
def test_a_copied_link_opened_in_a_fresh_browser_shows_the_same_view(browser: Browser, copied: str,
                                                                     look: str) -> None:
    context, page = fresh_page(browser, copied + ("&__theme=dark" if look == "dark" else ""))
    try:
        expect(page.get_by_role("tab", name="Attention", exact=True)).to_have_attribute("aria-selected", "true")
        panel = page.locator("[role=tabpanel]:visible").first
        expect(heatmap(page)).to_have_attribute("data-drawn", f"L{LAYER}-H{HEAD}")    # drawn with no click
        expect(panel.get_by_label("Text", exact=True)).to_have_value(TEXT)
        expect(panel.locator("#attention-layer input[type=number]")).to_have_value(str(LAYER))
        expect(panel.locator("#attention-head input[type=number]")).to_have_value(str(HEAD))
        expect(page.locator("#model-picker input").first).to_have_value("Bundled default model")
        expect(heatmap(page).locator(".attn-caption")).to_contain_text(f"Layer {LAYER}, head {HEAD}")
        assert painted(heatmap(page).locator("canvas")) > 500
        assert page.evaluate("() => document.body.classList.contains('dark')") == (look == "dark")
        no_error_toast(page)
        page.screenshot(path=str(ARTIFACTS / f"link-opened-{look}.png"))
    finally:
        context.close()


def test_embed_mode_shows_the_view_without_the_page_chrome(browser: Browser, copied: str) -> None:
    context, page = fresh_page(browser, copied + "&embed=1")
    try:
        expect(heatmap(page)).to_have_attribute("data-drawn", f"L{LAYER}-H{HEAD}")
        assert painted(heatmap(page).locator("canvas")) > 500
        for chrome in ("#main-tabs [role=tablist]", "#app-header", "#model-picker", ".copy-link-row",
                       ".tab-intro", ".embed-hidden", "footer"):
            expect(page.locator(chrome).first).to_be_hidden()
        expect(page.get_by_role("tab", name="Attention", exact=True)).to_be_hidden()
        expect(page.locator("#attention-layer input[type=number]")).to_have_value(str(LAYER))
        page.screenshot(path=str(ARTIFACTS / "link-embed.png"))
    finally:
        context.close()


def test_a_link_naming_a_layer_the_model_lacks_says_so_and_shows_layer_1(browser: Browser, app_served) -> None:
    context, page = fresh_page(browser, app_served.url + "?tab=attention&text=The+cat+sat.&layer=99&head=2")
    try:
        expect(page.locator(".toast-body").first).to_contain_text("layer must be a whole number from 1 to 6")
        expect(heatmap(page)).to_have_attribute("data-drawn", "L1-H2")
        expect(page.locator("#attention-layer input[type=number]")).to_have_value("1")
    finally:
        context.close()
