"""A real browser (chromium driven by Playwright; ``browser_helpers.find_browser``) opens every tab of the app on the
bundled default model, runs its first example, checks that the output appears and that no
error toast shows, and saves a screenshot of each tab under ``test-artifacts/``.
The Training tab starts a real (tiny) run and waits for its curves, then a checkpoint
shows up in the model picker and the probing tabs work on it."""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from explorer.formatting import percent

from support.browser_helpers import (ARTIFACTS, PLOT, TIMEOUT_MS, no_error_toast, open_tab, run_first_example,
                                     served_app)



@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_app(tmp_path_factory.mktemp("runs")) as (address, _):
        yield address


@pytest.fixture(scope="module")
def page(browser: Browser, url: str) -> Iterator[Page]:
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    expect(page.get_by_text("BERT Explorer").first).to_be_visible()
    yield page
    page.close()


def screenshot(page: Page, name: str) -> None:
    page.wait_for_timeout(500)        # let Plotly finish drawing
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_model_picker_shows_the_default_model(page: Page) -> None:
    expect(page.locator(".model-info").last).to_contain_text("Heads:")
    no_error_toast(page)


# (tab, what its first example must show: (CSS selector, text it contains or None for "is drawn"))
TABS = [
    ("Tokenize", [(".wordpieces", "[SEP]"), (".token-summary", "tokens")]),
    ("Embeddings", [(f"{PLOT} .heatmaplayer, {PLOT} .scatterlayer .trace", None), ("table", "neighbour")]),
    ("Attention", [(f"{PLOT} .heatmaplayer", None)]),
    ("Fill-mask", [(f"{PLOT} .barlayer", None), (".token-summary", "Uncertainty")]),
    ("QA", [(f"{PLOT} .barlayer, {PLOT} .scatterlayer .trace", None), (".token-summary", "Best answer")]),
]


def test_the_syntax_tab_scores_the_heads_against_the_bundled_treebank(page: Page) -> None:
    panel = open_tab(page, "Syntax")
    sentences = panel.get_by_label(re.compile("^Sentences")).first
    sentences.fill("40")                                     # the first 40 sentences: a few seconds on 2 cores
    panel.get_by_role("button", name="Score the heads").click()
    expect(panel.get_by_role("gridcell", name="dependent → head").first).to_be_attached()   # a best head, ...
    expect(panel.locator(f"{PLOT} .heatmaplayer").first).to_be_attached()  # ... and every head's grid
    expect(panel.get_by_text("baseline").first).to_be_visible()
    no_error_toast(page)
    screenshot(page, "syntax")
    layer, head = re.search(r"best head (\d+)-(\d+)", panel.locator(".prose, .md").filter(
        has_text="arcs): best head").first.inner_text()).groups()     # det's best head: layer from 1, head from 0
    cell = panel.locator(".cell-wrap span").filter(has_text=re.compile(r"^\s*det\s*$")).first   # the det row
    cell.click()                                                     # a row opens its head in the Attention tab
    attention = page.locator("[role=tabpanel]:visible").first
    expect(attention.locator(".attn-caption").first).to_contain_text(f"Layer {layer}, head {head}")
    no_error_toast(page)


@pytest.mark.parametrize(("tab", "shows"), TABS, ids=[t for t, _ in TABS])
def test_each_tab_runs_its_first_example(page: Page, tab: str, shows: list[tuple[str, str | None]]) -> None:
    panel = open_tab(page, tab)
    run_first_example(panel)
    for selector, text in shows:
        if text is None:
            expect(panel.locator(selector).first).to_be_attached()
        elif selector == "*":
            expect(panel.get_by_text(text).first).to_be_visible()
        else:
            expect(panel.locator(selector).last).to_contain_text(text, ignore_case=True)
    no_error_toast(page)
    screenshot(page, tab.lower())


def test_typed_input_works_too(page: Page) -> None:
    panel = open_tab(page, "Fill-mask")
    box = panel.get_by_label("Text with [MASK] tokens")
    box.fill("The cat sat on the [MASK].")
    panel.get_by_role("button", name="Fill", exact=True).click()
    # [CLS] the cat sat on the [MASK] . [SEP]: nine tokens (the example before it has seven)
    expect(panel.locator(".token-summary").last).to_contain_text("9 input tokens")
    no_error_toast(page)


def test_training_tab_curves_move_and_checkpoints_reach_the_picker(page: Page) -> None:
    panel = open_tab(page, "Training")
    # long enough that no browser is too slow to pause and stop it (300 steps once ended before Stop was pressed)
    panel.get_by_label("Steps", exact=True).fill("100000")
    panel.get_by_role("button", name="Start", exact=True).click()
    curves = panel.locator(".curves-view").first
    expect(curves).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"), timeout=120_000)
    expect(curves).to_have_attribute("data-draws", re.compile(r"^[1-9]\d*$"))
    status = panel.locator(".train-status").first
    panel.get_by_role("button", name="Pause", exact=True).click()
    expect(status).to_contain_text("paused")
    # One number per quantity: the status line's NSP accuracy is the mean the curve's bold line ends on.
    expect(status).to_contain_text("means of the last", timeout=30_000)
    page.wait_for_timeout(2_500)                                   # a tick after the pause: both have the last step
    mean = float(curves.get_attribute("data-mean-train-nsp_acc") or "nan")
    assert f"NSP acc {percent(mean)}" in status.inner_text(), (mean, status.inner_text())
    panel.get_by_role("button", name="Resume", exact=True).click()
    expect(status).to_contain_text("running")
    panel.get_by_role("button", name="Save checkpoint now", exact=True).click()
    expect(status).to_contain_text("Last checkpoint", timeout=60_000)   # saved (the status names it)
    screenshot(page, "training")
    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(status).to_contain_text("stopp")          # "stopping", then the run ends "stopped"
    picker = page.get_by_label("Model (used by every probing tab)")
    picker.click()
    option = page.get_by_role("option").filter(has_text="step")
    expect(option.first).to_be_visible(timeout=30_000)
    option.first.click()
    expect(page.locator(".model-info").last).to_contain_text("checkpoint")
    fill = open_tab(page, "Fill-mask")
    run_first_example(fill)
    expect(fill.locator(".token-summary").last).to_contain_text("checkpoint")
    no_error_toast(page)


def teardown_module() -> None:
    if os.environ.get("E2E_KEEP_ARTIFACTS") == "0":
        shutil.rmtree(ARTIFACTS, ignore_errors=True)


def test_compare_a_checkpoint_of_the_run_just_trained_with_its_last(page: Page) -> None:
    """After the Training test: the Compare tab's scrubber puts the run's first checkpoint against its last."""
    panel = open_tab(page, "Compare")
    panel.get_by_label("Text", exact=True).fill("the cat sat on the [MASK] .")
    panel.get_by_text("Step through a run", exact=False).click()
    slider = panel.get_by_role("slider").first
    slider.focus()
    page.keyboard.press("End")
    page.keyboard.press("Home")                       # to the oldest checkpoint: the comparison runs on release
    note = panel.locator(".token-summary").last
    expect(note).to_contain_text("Representations", timeout=60_000)
    expect(panel.get_by_text("Checkpoint 1 of").first).to_be_visible()
    expect(panel.locator(f"{PLOT} .heatmaplayer").first).to_be_attached()
    no_error_toast(page)
    screenshot(page, "compare")


def test_nearest_contextual_neighbours_of_bank_in_two_senses(page: Page) -> None:
    """The Embeddings tab's corpus search on the default model and the bundled *two senses* corpus it opens on:
    "bank" by a river finds river sentences first, "bank" for money money sentences (each paragraph of
    assets/corpora/two-senses.txt has "bank" in one sense, told by its words). The tab's words are glossed: the
    Markdown keeps the <abbr> and its hover title."""
    from explorer.embeddings.corpus_neighbours import TWO_SENSES_FILE
    from engine.text.documents import read_documents

    sense_of = {}
    for paragraph in read_documents(TWO_SENSES_FILE):
        words = set(re.findall(r"[a-z]+", " ".join(paragraph).lower()))
        sense = "river" if words & {"river", "stream", "creek", "lake", "pond", "canal", "brook"} else (
            "money" if words & {"money", "loan", "cash", "savings", "account"} else "other")
        sense_of.update((sentence, sense) for sentence in paragraph)
    picker = page.get_by_label("Model (used by every probing tab)")
    picker.click()
    page.get_by_role("option").filter(has_text="default").first.click()
    panel = open_tab(page, "Embeddings")
    expect(panel.locator("abbr.gloss[title]").first).to_be_attached()      # the glossary links survive Markdown
    panel.get_by_text("Nearest contextual neighbours in a corpus").click()
    expect(panel.get_by_role("radio", name=re.compile("Two senses"))).to_be_checked()   # the bundled corpus, chosen
    panel.get_by_role("button", name="Build the index", exact=True).click()
    expect(panel.get_by_text("Index ready").first).to_be_visible(timeout=60_000)
    expect(panel.get_by_text("Index ready").first).to_contain_text(f"{len(sense_of)} sentences")
    # [CLS] we had a picnic on the bank ...: "bank" is token 7; [CLS] i need to withdraw cash from the bank: 8
    for sentence, position, sense in (("We had a picnic on the bank of the river.", 7, "river"),
                                      ("I need to withdraw cash from the bank.", 8, "money")):
        panel.get_by_label("Sentence", exact=True).fill(sentence)
        panel.get_by_label("Token", exact=True).click()
        page.get_by_role("option", name=f"{position}: bank", exact=True).click()
        panel.get_by_role("button", name="Find neighbours", exact=True).click()
        found = panel.locator(".corpus-neighbours").first
        expect(found).to_contain_text(f"(token {position})")
        expect(found.locator("li").nth(1)).to_be_visible()
        for item in found.locator("li").all()[:2]:          # the two nearest: the same sense
            shown = item.inner_text().split(" · ", 1)[1].strip("…")
            assert [sense_of[s] for s in sense_of if shown in s][:1] == [sense], (sentence, shown)
    no_error_toast(page)
    screenshot(page, "neighbours")
