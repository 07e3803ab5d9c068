"""The real-browser tests' shared parts: a chromium under Playwright, found the usual ways (``find_browser``),
and the moves a user makes (open a tab, run its first example, look for an error toast)."""
from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

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
