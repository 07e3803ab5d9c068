"""What a page did while a real-browser test drove it, kept from its first script on: every toast it showed (an
info toast that left after a few seconds too), its uncaught script errors and its console errors. ``watched(page)``
starts the watch (before ``page.goto``); ``shown_toasts``, ``page_errors`` and ``console_errors`` read it."""
from __future__ import annotations

from playwright.sync_api import ConsoleMessage, Error, Page

# Every toast element gets its class and text recorded in ``window.__toasts`` when it appears, and again whenever
# its text changes (Svelte may fill it a moment after inserting it); a MutationObserver sees those that leave.
RECORD_TOASTS = """(() => {
    window.__toasts = [];
    const last = new WeakMap();
    const look = () => document.querySelectorAll('.toast-body').forEach(toast => {
        const seen = `${toast.className.replace(/\\s*svelte-\\S+/g, '')}: ${toast.innerText.trim()}`;
        if (last.get(toast) !== seen) { last.set(toast, seen); window.__toasts.push(seen); }
    });
    new MutationObserver(look).observe(document, {subtree: true, childList: true, characterData: true});
})();"""


def watched(page: Page) -> Page:
    """``page``, recording from its next navigation on: toasts (``shown_toasts``), uncaught errors
    (``page_errors``) and console errors (``console_errors``)."""
    errors: list[str] = []
    console: list[str] = []
    page.on("pageerror", lambda error: errors.append(_error_text(error)))
    page.on("console", lambda message: console.append(_console_text(message)) if message.type == "error" else None)
    page.add_init_script(RECORD_TOASTS)
    page.page_errors = errors                           # type: ignore[attr-defined]
    page.console_errors = console                       # type: ignore[attr-defined]
    return page


def shown_toasts(page: Page) -> list[str]:
    """Every toast ``page`` has shown since it was opened, as "<its classes>: <its text>", in order."""
    return list(page.evaluate("window.__toasts || []"))


def page_errors(page: Page) -> list[str]:
    """The uncaught script errors of a ``watched`` page."""
    return list(page.page_errors)                       # type: ignore[attr-defined]


def console_errors(page: Page) -> list[str]:
    """The console errors of a ``watched`` page, each with where it was logged."""
    return list(page.console_errors)                    # type: ignore[attr-defined]


def _error_text(error: Error) -> str:
    return f"{error.name}: {error.message}"


def _console_text(message: ConsoleMessage) -> str:
    where = message.location or {}
    return f"{message.text} ({where.get('url', '?')}:{where.get('lineNumber', '?')})"
