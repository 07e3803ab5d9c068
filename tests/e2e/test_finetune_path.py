"""Issue 13's path in a real browser: the Heads tab's Next sentence answers on the default model; the
Fine-tune tab fine-tunes the default model for sentence classification from the bundled example, the
run finishes, its checkpoint is picked in the model picker and the Heads tab classifies a sentence of
our own with it. Screenshots go to ``test-artifacts/``."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

import app
from app_helpers import serve
from browser_helpers import ARTIFACTS, PLOT, TIMEOUT_MS, chromium, no_error_toast, open_tab
from explorer.services import default_services


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    services = default_services(runs_root=tmp_path_factory.mktemp("finetune-runs"))
    with serve(app.create_app(services)) as client, chromium() as browser:
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(client.src)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        yield page
        page.close()
    services.get_worker().close()


def inner_tab(panel, name: str):
    panel.get_by_role("tab", name=name, exact=True).click()
    return panel.locator("[role=tabpanel]:visible").last


def test_next_sentence_answers_on_the_default_model(page: Page) -> None:
    heads = open_tab(page, "Heads")
    section = inner_tab(heads, "Next sentence")
    section.get_by_label("Sentence A", exact=True).fill("The cat sat on the mat.")
    section.get_by_label("Sentence B", exact=True).fill("Soon it was fast asleep.")
    section.get_by_role("button", name="Predict", exact=True).click()
    expect(section.locator(".token-summary").last).to_contain_text("IsNext")
    expect(section.locator(f"{PLOT} .barlayer").first).to_be_attached()
    no_error_toast(page)
    page.screenshot(path=str(ARTIFACTS / "heads-next-sentence.png"), full_page=True)


def test_fine_tune_classification_then_classify_with_the_result(page: Page) -> None:
    tab = open_tab(page, "Fine-tune")
    tab.get_by_role("button", name="Start", exact=True).click()          # the first task and its bundled example
    status = tab.locator(".train-status").first
    expect(status.locator("strong").first).to_have_text("finished", timeout=300_000)
    expect(tab.locator(f"{PLOT} .scatterlayer .trace").first).to_be_attached()
    page.screenshot(path=str(ARTIFACTS / "finetune.png"), full_page=True)
    picker = page.get_by_label("Model (used by every probing tab)")
    picker.click()
    option = page.get_by_role("option").filter(has_text="finetune-classification")
    expect(option.first).to_be_visible(timeout=30_000)
    option.first.click()
    expect(page.locator(".model-info").last).to_contain_text("sequence classification")
    heads = open_tab(page, "Heads")
    section = inner_tab(heads, "Classify")
    section.get_by_label("Text", exact=True).fill("What a wonderful, happy day.")
    section.get_by_role("button", name="Classify", exact=True).click()
    expect(section.locator(f"{PLOT} .barlayer").first).to_be_attached()
    expect(section.locator(".token-summary").last).to_contain_text("positive")
    no_error_toast(page)
    page.screenshot(path=str(ARTIFACTS / "heads-classify.png"), full_page=True)
