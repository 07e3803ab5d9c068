"""Issue 13's path in a real browser: the Heads tab's Next sentence answers on the default model; the
Fine-tune tab fine-tunes the default model from a bundled example for sentence classification, for
part-of-speech tagging and for multiple choice; each run finishes with its curves drawn, its checkpoint
is picked in the model picker and the Heads tab tries it on input of our own (Classify, Tag words,
Choose). Screenshots go to ``test-artifacts/``."""
from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from support.browser_helpers import ARTIFACTS, PLOT, TIMEOUT_MS, no_error_toast, open_tab, served_app


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Page]:
    with served_app(tmp_path_factory.mktemp("finetune-runs")) as (url, _):
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        yield page
        page.close()


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


def fine_tune(page: Page, task_label: str | None, screenshot: str) -> None:
    """Start the task (None: the first one) on its first bundled example with the form's defaults and wait
    for the run to finish with its loss and metric curves drawn."""
    tab = open_tab(page, "Fine-tune")
    if task_label is not None:
        tab.get_by_label("Task", exact=True).click()
        page.get_by_role("option", name=task_label, exact=True).click()
    tab.get_by_role("button", name="Start", exact=True).click()
    status = tab.locator(".train-status").first
    expect(status.locator("strong").first).to_have_text("running", timeout=60_000)
    expect(status.locator("strong").first).to_have_text("finished", timeout=300_000)
    curves = tab.locator(".finetune-curves .curves-view").first          # points drawn on canvas, as Training's
    expect(curves).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"))
    expect(curves).to_have_attribute("data-draws", re.compile(r"^[1-9]\d*$"))
    legend = curves.locator(".curves-key")                               # only the series that have points
    expect(legend.filter(has_text="held-out").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)


# What of the mistakes table reaches past its box: the scroll containers wider than they are, and any element drawn
# beyond the box's right edge (the hidden row Gradio sizes columns with is left out).
TOO_WIDE = """(box) => {
  const right = box.getBoundingClientRect().right, shown = [...box.querySelectorAll('*')].filter(
    e => !e.closest('[aria-hidden=true]') && e.getClientRects().length);
  return [box, ...shown].filter(e => e.scrollWidth > e.clientWidth + 4 && getComputedStyle(e).overflowX !== 'visible'
                                     || e.getBoundingClientRect().right > right + 4)
    .map(e => `${e.tagName}.${e.className} ${e.scrollWidth}/${e.clientWidth}`); }"""


def check_mistakes_table(page: Page, width: int) -> None:
    """At ``width`` px the Fine-tune tab's mistakes table fits its box (it wraps, never scrolls sideways), and a
    click on a row shows that example's whole input under it."""
    page.set_viewport_size({"width": width, "height": 1000})
    tab = page.locator("[role=tabpanel]:visible").first
    table = tab.locator(".finetune-wrong").first
    table.scroll_into_view_if_needed()
    expect(table.locator("[role=gridcell]").first).to_be_visible()
    assert table.evaluate(TOO_WIDE) == [], f"the mistakes table is wider than its box at {width} px"
    assert table.evaluate("(box) => box.scrollWidth <= box.clientWidth + 4")
    table.locator("[role=gridcell]").nth(1).click()
    expect(tab.locator(".finetune-wrong-example").first).to_contain_text("Held-out example")
    page.screenshot(path=str(ARTIFACTS / f"finetune-mistakes-{width}.png"), full_page=True)


def pick_run(page: Page, task: str, head_title: str) -> None:
    """Choose the newest checkpoint of the ``<task>-<time>`` run in the model picker."""
    picker = page.get_by_label("Model (used by every probing tab)")
    picker.click()
    option = page.get_by_role("option").filter(has_text=f"{task}-")
    expect(option.first).to_be_visible(timeout=30_000)
    option.first.click()
    expect(page.locator(".model-info").last).to_contain_text(head_title)


def test_fine_tune_classification_then_classify_with_the_result(page: Page) -> None:
    fine_tune(page, None, "finetune.png")                               # the first task and its bundled example
    pick_run(page, "classification", "sequence classification")
    heads = open_tab(page, "Heads")
    section = inner_tab(heads, "Classify")
    section.get_by_label("Text", exact=True).fill("What a wonderful, happy day.")
    section.get_by_role("button", name="Classify", exact=True).click()
    expect(section.locator(f"{PLOT} .barlayer").first).to_be_attached()
    expect(section.locator(".token-summary").last).to_contain_text("positive")
    no_error_toast(page)
    page.screenshot(path=str(ARTIFACTS / "heads-classify.png"), full_page=True)


def test_fine_tune_part_of_speech_tagging_then_tag_a_sentence_of_our_own(page: Page) -> None:
    fine_tune(page, "Tag words (part of speech, entities)", "finetune-pos.png")
    for width in (1360, 390):                                   # a desktop and a phone
        check_mistakes_table(page, width)
    page.set_viewport_size({"width": 1360, "height": 1000})
    fresh = page.context.browser.new_page(viewport={"width": 1360, "height": 1000})   # a fresh page knows the run
    fresh.goto(page.url)
    status = open_tab(fresh, "Fine-tune").locator(".train-status").first
    expect(status.locator("strong").first).to_have_text("finished")
    expect(status).to_contain_text("step 40 / 40")
    fresh.close()
    pick_run(page, "token_classification", "Heads › Tag words")
    heads = open_tab(page, "Heads")
    section = inner_tab(heads, "Tag words")
    section.get_by_label("Text", exact=True).fill("The old man walked his dog in the park.")
    section.get_by_role("button", name="Tag", exact=True).click()
    summary = section.locator(".token-summary").last
    expect(summary).to_contain_text("words")
    tagged = section.locator(".tagged-words .tw-body").last     # the words, not the legend
    expect(tagged).to_contain_text("NOUN")                # part-of-speech tags from the bundled UD sample
    expect(tagged).to_contain_text("DET")
    no_error_toast(page)
    page.screenshot(path=str(ARTIFACTS / "heads-tag.png"), full_page=True)


def test_fine_tune_multiple_choice_then_choose_between_endings_of_our_own(page: Page) -> None:
    fine_tune(page, "Choose the right ending", "finetune-choice.png")
    pick_run(page, "multiple_choice", "Heads › Choose")
    heads = open_tab(page, "Heads")
    section = inner_tab(heads, "Choose")
    section.get_by_label("Context", exact=True).fill("He forgot his umbrella at home.")
    section.get_by_label("Choices (2 to 5, one per line)", exact=True).fill(
        "He got wet in the rain.\nThe moon is made of cheese.\nShe sold the piano.")
    section.get_by_role("button", name="Choose", exact=True).click()
    expect(section.locator(f"{PLOT} .barlayer").first).to_be_attached()
    expect(section.locator(".token-summary").last).to_contain_text("over 3 choices")
    no_error_toast(page)
    page.screenshot(path=str(ARTIFACTS / "heads-choose.png"), full_page=True)
