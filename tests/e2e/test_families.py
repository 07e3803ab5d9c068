"""The BERT family in a real browser (chromium, Playwright): a RoBERTa and a DistilBERT, saved by ``transformers``
beside their own tokenizers in an allowed models folder, load through the Load box; the picker and the model's
description name the family; Tokenize shows RoBERTa's pieces with the visible word-start mark, Attention draws its
canvas, Embeddings shows the breakdown the family builds (no segment row for DistilBERT), Why explains a fill-mask
guess at ``<mask>``, Fill-mask takes ``[MASK]``, and Compare puts the default BERT against the DistilBERT (different vocabularies, aligned by words).
Screenshots go to ``test-artifacts/families-<tab>.png``."""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from support.browser_helpers import ARTIFACTS, DESKTOP, choose_option, no_error_toast, open_tab, opened, \
    run_first_example, served_app
from support.saved_families import save_family_model


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    models = tmp_path_factory.mktemp("family-models")
    for family in ("roberta", "distilbert"):
        save_family_model(family, models / family)
    before = os.environ.get("EXPLORER_MODEL_DIRS")
    os.environ["EXPLORER_MODEL_DIRS"] = str(models)
    try:
        with served_app(tmp_path_factory.mktemp("family-runs")) as (address, _):
            SAVED["models"] = models
            yield address
    finally:
        if before is None:
            os.environ.pop("EXPLORER_MODEL_DIRS", None)
        else:
            os.environ["EXPLORER_MODEL_DIRS"] = before


SAVED: dict[str, Path] = {}


@pytest.fixture(scope="module")
def page(browser: Browser, url: str) -> Iterator[Page]:
    with opened(browser, url, DESKTOP) as page:
        yield page


def screenshot(page: Page, name: str) -> None:
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"families-{name}.png"), full_page=True)


def load(page: Page, family: str, name: str) -> None:
    """Type the folder in the Load box and press Load; the description names the family."""
    page.get_by_label("Load another model").fill(str(SAVED["models"] / family))
    page.get_by_role("button", name="Load", exact=True).click()
    expect(page.locator(".model-info").last).to_contain_text(name, timeout=60_000)
    no_error_toast(page)


def test_a_roberta_walks_the_tabs(page: Page) -> None:
    load(page, "roberta", "RoBERTa")
    expect(page.get_by_label("Model (used by every probing tab)")).to_have_value(re.compile(r"RoBERTa, \d"))
    tokenize = open_tab(page, "Tokenize")
    run_first_example(tokenize)
    pieces = tokenize.locator(".wp-strip").last
    expect(pieces).to_contain_text("▁")                      # byte-level word starts, shown with one visible mark
    assert "Ġ" not in pieces.inner_text()
    expect(pieces.locator(".wp-special").first).to_have_text("<s>")
    screenshot(page, "tokenize")

    attention = open_tab(page, "Attention")
    run_first_example(attention)
    heatmap = attention.locator(".attention-heatmap .attn-view").first
    expect(heatmap).to_have_attribute("data-drawn", "L1-H0")
    no_error_toast(page)
    screenshot(page, "attention")

    embeddings = open_tab(page, "Embeddings")
    run_first_example(embeddings)
    expect(embeddings.locator(".embeddings-summary").last).to_contain_text("equals the model's own embedding output")
    no_error_toast(page)

    why = open_tab(page, "Why")
    run_first_example(why)                                    # fill-mask's "The United [MASK] of America."
    expect(why.locator(".why-tokens .wt").first).to_be_attached(timeout=60_000)
    expect(why.locator(".token-summary").last).to_contain_text("<mask>")   # escaped, not eaten as a tag
    no_error_toast(page)
    screenshot(page, "why")

    fill = open_tab(page, "Fill-mask")
    fill.get_by_label("Text with [MASK] tokens").fill("The capital of France is [MASK].")
    fill.get_by_role("button", name="Fill", exact=True).click()
    expect(fill.locator(".token-summary").last).to_contain_text("<mask>", timeout=60_000)
    no_error_toast(page)
    screenshot(page, "fill-mask")


def test_a_distilbert_has_no_segment_row_and_compares_with_bert(page: Page) -> None:
    load(page, "distilbert", "DistilBERT")
    embeddings = open_tab(page, "Embeddings")
    run_first_example(embeddings)
    summary = embeddings.locator(".embeddings-summary").last
    expect(summary).to_contain_text("Mean norms: word")
    assert "segment" not in summary.inner_text().split("Mean norms:")[1].split(".")[0]
    no_error_toast(page)

    compare = open_tab(page, "Compare")
    choose_option(page, compare.get_by_label("Model A"), "Bundled default model")
    choose_option(page, compare.get_by_label("Model B"), "DistilBERT")
    compare.get_by_label("Text", exact=True).fill("The quick brown fox jumps over the lazy dog.")
    compare.get_by_role("button", name="Compare", exact=True).click()
    expect(compare.locator(".token-summary").last).to_contain_text(re.compile("linear CKA", re.I), timeout=60_000)
    no_error_toast(page)
    screenshot(page, "compare")
