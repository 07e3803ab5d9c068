"""Turn engine exceptions into messages a person understands (never a stack trace)."""
from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr

from engine.disk_faults import DiskFault

log = logging.getLogger("explorer")

F = TypeVar("F", bound=Callable[..., Any])

MAX_TEXT_CHARS = 100_000
# Failures whose message is written for the user: bad input, a missing file or model, no network, a full or
# read-only disk (``DiskFault``: one sentence).
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, ConnectionError, PermissionError, TimeoutError,
               DiskFault)
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


def whole_number(value: Any, name: str, low: int, high: int | None = None) -> int:
    """A form's ``value`` as a whole number in [low, high] (no upper bound when ``high`` is None; "4", 4.0
    and 4 all give 4), or ``gr.Error`` saying what ``name`` must be: "Steps must be a whole number, got 'x'."
    for no number (text, None, a bool, infinity, NaN), "... a whole number from 1 to 100, got 2.5." (or "of at
    least 1") for a fraction or a number out of range. The app's one parser of whole-number form fields."""
    number = _finite_number(value)
    if number is None:
        raise gr.Error(f"{name} must be a whole number, got {value!r}.", print_exception=False)
    if number != int(number) or not low <= number or (high is not None and number > high):
        bound = f"from {low:,} to {high:,}" if high is not None else f"of at least {low:,}"
        raise gr.Error(f"{name} must be a whole number {bound}, got {value!r}.", print_exception=False)
    return int(number)


def check_number_inputs(demo: gr.Blocks) -> None:
    """Give every ``gr.Number`` and ``gr.Slider`` of ``demo`` a first check of what a request sends it: a value
    that is no finite number ("abc", infinity, NaN, a bool; None for a slider) is refused with a sentence
    naming the field ("Layer (0-based) must be a whole number, got 'abc'.") instead of failing in Gradio's
    own preprocessing, whose error reaches the client with no message; a number written as text ("3") is
    read as the number. Ranges stay Gradio's check (and the handler's)."""
    for block in demo.blocks.values():
        if isinstance(block, (gr.Number, gr.Slider)):
            block.preprocess = _checked_preprocess(block)


def _checked_preprocess(block: gr.Number | gr.Slider) -> Callable[[Any], Any]:
    """``block.preprocess`` behind the check of :func:`check_number_inputs`."""
    original = block.preprocess
    name = str(block.label or "This number")
    step = getattr(block, "step", None)
    whole = getattr(block, "precision", None) == 0 or (isinstance(block, gr.Slider) and float(step or 1).is_integer()
                                                       and float(block.minimum or 0).is_integer())
    kind = "a whole number" if whole else "a number"

    def preprocess(payload: Any) -> Any:
        if payload is None and isinstance(block, gr.Number):
            return original(payload)                      # an empty Number box: the handler says what it needs
        number = _finite_number(payload)
        if number is None:
            raise gr.Error(f"{name} must be {kind}, got {payload!r}.", print_exception=False)
        return original(number)

    return preprocess


def _finite_number(value: Any) -> int | float | None:
    """``value`` as an int or a finite float ("2.5" and "1e3" too), None when it is no number (or a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None

