"""Turn engine exceptions into messages a person understands (never a stack trace)."""
from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr

log = logging.getLogger("explorer")

F = TypeVar("F", bound=Callable[..., Any])

MAX_TEXT_CHARS = 100_000
# Failures whose message is written for the user: bad input, a missing file or model, no network.
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, ConnectionError, PermissionError, TimeoutError)
_CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b:?\s*")
_SURROGATE = re.compile("[\ud800-\udfff]")
# An absolute server path inside a message (POSIX or Windows): shown as "…/<last part>".
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])(?:[A-Za-z]:\\|/)(?:[^\s'\"`,;:()]+[/\\])+([^\s'\"`,;:()/\\]*)")


def shown(message: str) -> str:
    """``message`` as a user should read it: no exception class names ("SafetensorError: x" -> "x") and
    no absolute server paths ("/srv/app/runs/a/run.json" -> "…/run.json")."""
    return hide_paths(_CLASS_NAME.sub("", message)).strip()


def hide_paths(message: str) -> str:
    """Replace every absolute file-system path in ``message`` by ``…/<its last part>``: where the
    server keeps its files is none of the user's business (and on a public instance, a leak)."""
    return _ABSOLUTE_PATH.sub(lambda m: f"…/{m.group(1)}" if m.group(1) else "…/", message)


def clear_on_failure(event: Any, outputs: list[Any]) -> None:
    """After ``event`` fails (its handler raised ``gr.Error``), empty ``outputs``, so the old result does
    not stay on screen under the new error as if it answered the new input."""
    event.failure(lambda: tuple(None for _ in outputs) if len(outputs) > 1 else None, inputs=None,
                  outputs=outputs, api_visibility="private", show_progress="hidden", queue=False)


def friendly_errors(fn: F) -> F:
    """Wrap an event handler: ``gr.Error`` passes through, ``USER_ERRORS`` (``ValueError``, a missing
    file, no network) become ``gr.Error(message)``, anything else is logged and shown as a short
    message. No stack trace or exception class name reaches the user."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except USER_ERRORS as e:
            raise gr.Error(shown(str(e)) or "Invalid input.", print_exception=False) from None
        except Exception as e:  # noqa: BLE001 - last line of defence for the UI
            log.exception("unexpected error in %s", getattr(fn, "__name__", fn))
            detail = shown(str(e))[:300]
            raise gr.Error(f"Something went wrong{f' ({detail})' if detail else ''}. The app is still running.",
                           print_exception=False) from None

    return wrapper  # type: ignore[return-value]


def require_text(text: str | None, what: str = "text", empty_message: str | None = None) -> str:
    """Return ``text`` if it is non-blank and at most ``MAX_TEXT_CHARS`` long, else raise ``gr.Error``."""
    if text is None or not text.strip():
        raise gr.Error(empty_message or f"Type some {what}.", print_exception=False)
    check_length(text, what)
    return text


def check_length(text: str, what: str = "text") -> None:
    """Raise ``gr.Error`` if ``text`` is longer than ``MAX_TEXT_CHARS`` or is not valid Unicode
    (lone surrogates, which a hand-written JSON request can carry, break the tokenizer)."""
    if len(text) > MAX_TEXT_CHARS:
        raise gr.Error(
            f"The {what} is too long: {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}. "
            "Paste a shorter passage.",
            print_exception=False,
        )
    if (bad := _SURROGATE.search(text)) is not None:
        raise gr.Error(f"The {what} is not valid Unicode: it holds a lone surrogate code point "
                       f"(at character {bad.start():,}). Retype or re-paste it.",
                       print_exception=False)


def wire_run(api_name: str, button: Any, box: Any, examples: Any, **event: Any) -> None:
    """A tab's one action on its three triggers: ``button`` (the public ``api_name``), Enter in ``box`` and a
    click on ``examples`` (private ``<api_name>_submit`` / ``_example_run``), each clearing ``event["outputs"]``
    when it fails. ``event`` holds the handler and its inputs, outputs and options (``fn=``, ``inputs=``, ...)."""
    outputs = event["outputs"]
    clear_on_failure(button.click(api_name=api_name, **event), outputs)
    clear_on_failure(box.submit(api_name=f"{api_name}_submit", api_visibility="private", **event), outputs)
    clear_on_failure(examples.load_input_event.then(api_name=f"{api_name}_example_run", api_visibility="private",
                                                    **event), outputs)


def whole_number(value: Any, name: str, low: int, high: int) -> int:
    """A form's ``value`` as a whole number in [low, high] ("4", 4.0 and 4 all give 4), or ``gr.Error`` saying
    what ``name`` must be (not a number, not whole, infinite or out of range)."""
    try:
        number = int(value)
        whole = float(value) == number
    except (TypeError, ValueError, OverflowError):
        raise gr.Error(f"{name} must be a whole number, got {value!r}.", print_exception=False) from None
    if not whole or not low <= number <= high:
        raise gr.Error(f"{name} must be {low} to {high}, got {value!r}.", print_exception=False)
    return number

