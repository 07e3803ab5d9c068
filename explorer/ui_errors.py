"""Turn engine exceptions into messages a person understands (never a stack trace)."""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr

log = logging.getLogger("explorer")

F = TypeVar("F", bound=Callable[..., Any])

MAX_TEXT_CHARS = 100_000


def friendly_errors(fn: F) -> F:
    """Wrap an event handler: ``gr.Error`` passes through, ``ValueError`` becomes
    ``gr.Error(str(e))``, anything else is logged and shown as a short message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except ValueError as e:
            raise gr.Error(str(e) or "Invalid input.", print_exception=False) from None
        except Exception as e:  # noqa: BLE001 - last line of defence for the UI
            log.exception("unexpected error in %s", getattr(fn, "__name__", fn))
            raise gr.Error(f"Something went wrong ({type(e).__name__}: {e}). The app is still running.") from None

    return wrapper  # type: ignore[return-value]


def require_text(text: str | None, what: str = "text", empty_message: str | None = None) -> str:
    """Return ``text`` if it is non-blank and at most ``MAX_TEXT_CHARS`` long, else raise ``gr.Error``."""
    if text is None or not text.strip():
        raise gr.Error(empty_message or f"Type some {what}.", print_exception=False)
    check_length(text, what)
    return text


def check_length(text: str, what: str = "text") -> None:
    """Raise ``gr.Error`` if ``text`` is longer than ``MAX_TEXT_CHARS``."""
    if len(text) > MAX_TEXT_CHARS:
        raise gr.Error(
            f"The {what} is too long: {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}. "
            "Paste a shorter passage.",
            print_exception=False,
        )
