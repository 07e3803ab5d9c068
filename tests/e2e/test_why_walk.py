"""The Why tab's example, then *Explain* (issue 46), in chromium on the bundled default model: a click on the first
example already runs its explanation; *Explain* pressed right after (once the example has filled the form) asks for
the very same one, and the server joins it to the one under way (``explorer/serving/in_flight.py``): the page
draws the example's explanation (its tokens, the model's guess), computed once, and never says a heavy request is
"ahead of yours" (every toast the page shows is recorded as it appears, ``support.page_watch``). *Explain* pressed
again after the answer brings a second answer, again with no such message. The explanation is slowed a little on
the server (``slowed_attribution``) so that the press lands while the example's explanation is still running,
as it does on a slower machine or a bigger model."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from support.app_helpers import slowed_attribution
from support.browser_helpers import DESKTOP, TIMEOUT_MS, open_tab
from support.page_watch import console_errors, page_errors, shown_toasts, watched

from engine.probes.attribution.methods import attribute
from explorer.why import tab as why_tab
from explorer.why.actions import EXAMPLES

STEP_S = 0.03           # per integration point: the example's 50 points take 1.5 s more than on an idle machine
# Counts the Why panel's answers: each time its outputs stop being pending (Gradio's loading state) after being so.
COUNT_ANSWERS = """panel => { window.__answers = 0; let busy = false;
    new MutationObserver(() => {
        const now = panel.querySelector('.pending, .generating') !== null;
        if (busy && !now) window.__answers += 1;
        busy = now;
    }).observe(panel, {subtree: true, childList: true, attributes: true, attributeFilter: ['class']}); }"""


@pytest.fixture
def why(browser: Browser, app_served: Any) -> Iterator[Page]:
    """A watched page on the served app, on the Why tab, its answers counted (``window.__answers``)."""
    page = watched(browser.new_page(viewport=DESKTOP))
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(app_served.url)
        expect(page.locator(".model-info").last).to_contain_text("Heads:")
        open_tab(page, "Why").evaluate(COUNT_ANSWERS)
        yield page
    finally:
        page.close()


@pytest.fixture(scope="module")
def expected(app_served: Any) -> Any:
    """The first example's explanation as the engine gives it (its tokens, the model's guess): what the page must
    draw."""
    task, text = EXAMPLES[0][:2]
    return attribute(app_served.services.model("default"), task, text)


@pytest.fixture
def explanations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The inputs of every explanation the served Why tab computes from now on (a joined request computes none),
    each computation slowed by ``STEP_S`` per integration point."""
    calls: list[tuple[Any, ...]] = []
    real = why_tab.explain_prediction

    def counted(*args: Any) -> Any:
        calls.append(args[2:5])                      # task, text, pair
        return real(*args)

    monkeypatch.setattr(why_tab, "explain_prediction", counted)
    slowed_attribution(monkeypatch, STEP_S)
    return calls


def no_ahead_message(page: Page) -> list[str]:
    """Every toast the page has shown, after checking that none was an error or said a request is ahead."""
    toasts = shown_toasts(page)
    assert not [toast for toast in toasts if "ahead" in toast.lower() or "error" in toast.split(":", 1)[0]], toasts
    return toasts


def answered(page: Page, panel, tokens: list[str], prediction: str) -> None:
    """The panel shows the explanation of ``tokens`` (every token, in order) of ``prediction`` (the engine's words:
    "'states' (probability 63.5%)"), all of it drawn."""
    expect(panel.locator(".why-tokens .wt-tok")).to_have_text(tokens)
    expect(panel.locator(".token-summary").first).to_contain_text(f"the model predicts {prediction}")
    expect(panel.locator(".pending, .generating")).to_have_count(0)
    assert page_errors(page) == [] and console_errors(page) == [], (page_errors(page), console_errors(page))


def test_the_first_example_then_explain_draws_its_explanation_once_and_nothing_is_ahead(
        why: Page, expected: Any, explanations: list[tuple[Any, ...]]) -> None:
    task, text, pair = EXAMPLES[0][:3]
    panel = why.locator("[role=tabpanel]:visible").first
    panel.locator("tr.tr-body").first.locator("td").first.click()
    expect(panel.get_by_label("Text with [MASK]", exact=False).first).to_have_value(text)   # filled: it runs
    panel.get_by_role("button", name="Explain", exact=True).click()                          # right after
    answered(why, panel, expected.tokens, expected.prediction)
    assert explanations == [(task, text, pair)], explanations     # computed once: the press joined the example's
    no_ahead_message(why)

    why.evaluate("window.__answers = 0")
    panel.get_by_role("button", name="Explain", exact=True).click()      # again, after the answer
    why.wait_for_function("window.__answers >= 1")                       # a second answer came
    answered(why, panel, expected.tokens, expected.prediction)
    assert explanations == [(task, text, pair)] * 2, explanations
    no_ahead_message(why)
