"""The real-browser tests' shared parts: Debian's chromium under Playwright, and the moves a user makes
(open a tab, run its first example, look for an error toast)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"            # Debian's; never a downloaded browser
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
TIMEOUT_MS = 60_000                       # a 2-core CPU shared with a training run is slow
PLOT = ".js-plotly-plot"
expect.set_options(timeout=TIMEOUT_MS)


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Headless chromium, closed afterwards; screenshots go to ``ARTIFACTS``."""
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_tab(page: Page, name: str):
    """Click the tab ``name`` and return its visible panel."""
    page.get_by_role("tab", name=name, exact=True).click()
    panel = page.locator("[role=tabpanel]:visible").first
    expect(panel).to_be_visible()
    return panel


def run_first_example(panel) -> None:
    """Click the first row of the panel's examples (it fills the inputs and runs)."""
    panel.locator("tr.tr-body").first.locator("td").first.click()


def no_error_toast(page: Page) -> None:
    """No error toast is showing."""
    errors = page.locator(".toast-body.error")
    assert errors.count() == 0, errors.first.inner_text()
