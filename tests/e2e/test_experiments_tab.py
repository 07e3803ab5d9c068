"""Issue 47's "done when" in a real browser: the Experiments tab starts a tiny two-arm experiment, its arms' MLM
loss curves are drawn on the shared curves view as they come (points on the canvas, a legend entry per arm), and
it ends in our table beside the paper's column, with the scale and a verdict on the claim, and the downloads.
Screenshot in ``test-artifacts/``."""
from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from support.browser_helpers import ARTIFACTS, TIMEOUT_MS, no_error_toast, open_tab, served_app
from support.tiny_experiment import offered


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Page]:
    with offered(), served_app(tmp_path_factory.mktemp("experiment-runs")) as (url, services):
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        yield page
        page.close()
        if services.experiments is not None:
            services.experiments.stop()
            services.experiments.wait(120)


def test_the_experiments_tab_runs_one_with_live_curves_and_the_final_table(page: Page) -> None:
    tab = open_tab(page, "Experiments")
    expect(tab.locator(".experiment-about").first).to_contain_text("Masking mix, tiny (test)")
    expect(tab.locator(".experiment-status").first).to_contain_text("No experiment started yet")
    tab.get_by_role("button", name="Start", exact=True).click()
    status = tab.locator(".experiment-status").first
    expect(status).to_contain_text("tiny-mix", timeout=30_000)
    curves = tab.locator(".experiment-curves .curves-view").first
    expect(curves).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"), timeout=120_000)   # drawn live
    expect(curves).to_have_attribute("data-draws", re.compile(r"^[1-9]\d*$"))
    expect(status).to_contain_text("Finished", timeout=240_000)
    legend = curves.locator(".curves-key")
    expect(legend.filter(has_text="80/10/10 (BERT's)").first).to_be_visible()
    expect(legend.filter(has_text="100% [MASK]").first).to_be_visible()
    table = tab.locator(".experiment-table").first
    expect(table.locator("th").filter(has_text="paper: MNLI")).to_have_count(1)
    expect(table.locator("td").filter(has_text="84.3")).to_have_count(1)
    expect(table).to_contain_text("BERT's mix and 100% [MASK] fine-tune about equally: one seed, no spread")
    expect(table).to_contain_text("scale: tiny preset")
    for name in ("tiny-mix-table.csv", "tiny-mix-table.json", "tiny-mix-curves.csv"):     # the downloads
        expect(tab.locator(f"a[href$='/{name}']")).to_have_count(1)
    expect(tab.get_by_role("button", name="Start", exact=True)).to_be_enabled()
    no_error_toast(page)
    page.screenshot(path=str(ARTIFACTS / "experiments-tab.png"), full_page=True)
