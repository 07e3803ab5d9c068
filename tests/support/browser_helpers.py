"""The real-browser tests' shared parts: a chromium under Playwright, found the usual ways (``find_browser``),
the app served on default services (``served_app``), the moves a user makes (open a tab, run its first example,
look for an error toast) and the checks on what the page draws (text contrast, figures following the theme,
titles inside a phone's screen)."""
from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

# Looked up on PATH in this order (Debian's, Ubuntu's, Google's); then Playwright's own chromium, when
# `python -m playwright install chromium` has put it where Playwright looks. The tests never download one.
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_COMMANDS = ("apt-get install chromium", "python -m playwright install chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEOUT_MS = 60_000                       # a 2-core CPU shared with a training run is slow
PLOT = ".js-plotly-plot"
LOOKS = ("light", "dark", "phone")       # the canvas tests' looks: two themes on a desktop, a phone
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1360, "height": 1000}
expect.set_options(timeout=TIMEOUT_MS)


def find_browser(playwright_chromium: str | None,
                 which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The chromium to drive: the first of ``BROWSER_NAMES`` on PATH, else ``playwright_chromium`` (the path
    Playwright's ``chromium.executable_path`` names) when that file exists; None when there is neither."""
    for name in BROWSER_NAMES:
        found = which(name)
        if found:
            return found
    if playwright_chromium and Path(playwright_chromium).is_file():
        return playwright_chromium
    return None


def no_browser_message(playwright_chromium: str | None) -> str:
    """What was tried and how to install a browser, for a run that found none."""
    own = f"at {playwright_chromium}" if playwright_chromium else "(Playwright names no path)"
    return (f"No chromium for the real-browser tests. Tried on PATH: {', '.join(BROWSER_NAMES)} "
            f"(PATH={os.environ.get('PATH', '')}); and Playwright's own chromium {own}: not installed. "
            f"Install one: `{INSTALL_COMMANDS[0]}` (Debian) or `{INSTALL_COMMANDS[1]}` (Playwright's "
            "build), then run the tests again.")


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Headless chromium (``find_browser``), closed afterwards; screenshots go to ``ARTIFACTS``. Fails the
    test, naming what was tried and how to install one, when no chromium is found."""
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        own = playwright.chromium.executable_path
        path = find_browser(own)
        if path is None:
            pytest.fail(no_browser_message(own), pytrace=False)
        # Playwright's own is launched as Playwright launches it (it picks its headless build itself).
        browser = playwright.chromium.launch(executable_path=None if path == own else path, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def served_app(runs_root: Path) -> Iterator[tuple[str, Any]]:
    """The whole app on default services whose runs folder is ``runs_root``, served: its URL and its services;
    the training worker is closed afterwards."""
    import app
    from explorer.services import default_services
    from support.app_helpers import serve

    services = default_services(runs_root=runs_root)
    try:
        with serve(app.create_app(services)) as client:
            yield client.src, services
    finally:
        if services.worker is not None:
            services.worker.close()


def url_and_viewport(url: str, look: str) -> tuple[str, dict[str, int]]:
    """The page address and the viewport of ``look`` (``LOOKS``): the dark theme by its URL, a phone's width."""
    return url + ("?__theme=dark" if look == "dark" else ""), PHONE if look == "phone" else DESKTOP


@contextlib.contextmanager
def opened(browser: Browser, url: str, viewport: dict[str, int] = DESKTOP) -> Iterator[Page]:
    """A page on ``url`` (downloads accepted), the model picker filled in, closed afterwards."""
    page = browser.new_page(viewport=viewport, accept_downloads=True)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(url)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        yield page
    finally:
        page.close()


def open_tab(page: Page, name: str):
    """Click the tab ``name`` and return its visible panel."""
    page.get_by_role("tab", name=name, exact=True).click()
    panel = page.locator("[role=tabpanel]:visible").first
    expect(panel).to_be_visible()
    return panel


def run_first_example(panel) -> None:
    """Click the first row of the panel's examples (it fills the inputs and runs)."""
    panel.locator("tr.tr-body").first.locator("td").first.click()


def choose_option(page: Page, field, text: str, attempts: int = 4) -> None:
    """Open the dropdown ``field`` and pick the option containing ``text``, until the field shows it. A list the
    server redraws (a timer's tick sends new choices) can move the options under the click: pick again then."""
    for _ in range(attempts):
        field.click()
        option = page.get_by_role("option").filter(has_text=text).first
        expect(option).to_be_visible()
        option.click()
        page.wait_for_timeout(300)
        if text in field.input_value():
            return
    raise AssertionError(f"the dropdown shows {field.input_value()!r}, not an option with {text!r}")


def no_error_toast(page: Page) -> None:
    """No error toast is showing."""
    errors = page.locator(".toast-body.error")
    assert errors.count() == 0, errors.first.inner_text()


def contrast(locator) -> float:
    """WCAG 2's contrast ratio of the element's text colour on its background colour."""
    return locator.evaluate("""e => {
        const lum = c => { const [r, g, b] = c.match(/[0-9.]+/g).slice(0, 3).map(v => {
            v = v / 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
            return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
        const style = getComputedStyle(e);
        const [a, b] = [lum(style.color), lum(style.backgroundColor)].sort((x, y) => x - y);
        return (b + 0.05) / (a + 0.05); }""")


def check_figures_follow_the_theme(panel, theme: str) -> None:
    """Each drawn figure's background is the page's (transparent), and its axis text is readable on it:
    light text on the dark theme, dark text on the light one."""
    panel.page.wait_for_timeout(300)                # Plotly may still be replacing a figure just drawn
    for plot in panel.locator(f"{PLOT}:visible").all():
        background = settled(plot.locator(".main-svg").first, "e => getComputedStyle(e).backgroundColor")
        assert background in ("rgba(0, 0, 0, 0)", "transparent"), background
        ticks = plot.locator(".xtick text, .ytick text")
        if ticks.count():
            fill = settled(ticks.first, "e => getComputedStyle(e).fill")
            channels = [int(c) for c in fill[fill.index("(") + 1:fill.index(")")].split(",")[:3]]
            bright = sum(channels) / 3
            assert (bright > 150) if theme == "dark" else (bright < 120), (theme, fill)


def settled(locator, script: str, tries: int = 20) -> str:
    """``script``'s value on ``locator``, asked again while it is empty (an element Plotly is replacing)."""
    for _ in range(tries):
        value = locator.evaluate(script)
        if value:
            return value
        locator.page.wait_for_timeout(250)
    return value


def check_titles_fit_the_screen(panel) -> None:
    """Every drawn figure's title lies inside the page's width (a phone's screen), not cut at either side."""
    width = panel.page.viewport_size["width"]
    for title in panel.locator(f"{PLOT}:visible .gtitle").all():
        box = title.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (title.text_content(), box)


LARGE = "random weights, bert-large shape"       # the picker's label of the model ``pin_large_model`` pins


def pin_large_model(services: Any) -> Any:
    """A bert-large-shaped model (24 layers x 16 heads of size 64, hidden 1024; random weights, a narrow
    feed-forward: what is sent depends on the layers, heads, head size and tokens alone), pinned in the app's
    registry as ``large`` and listed in the picker as ``LARGE``."""
    import torch

    from engine.model.config import BertConfig
    from engine.model.heads import BertWithHeads
    from engine.model.loaded_model import LoadedModel

    config = BertConfig(vocab_size=services.tokenizer.vocab_size, hidden_size=1024, num_hidden_layers=24,
                        num_attention_heads=16, intermediate_size=64)
    torch.manual_seed(0)
    loaded = LoadedModel(BertWithHeads(config, heads=("mlm",)).eval(), services.tokenizer, config, LARGE)
    services.registry().pin("large", loaded)
    return loaded


def saved(page: Page, button) -> tuple[str, bytes]:
    """Click ``button``; the download's file name and bytes."""
    with page.expect_download() as download:
        button.click()
    return download.value.suggested_filename, Path(download.value.path()).read_bytes()
