"""One value of a link: which query key it has, which widget it fills, and how it is read and written.

A :class:`Field` is the schema's entry (``schemas.py``); a :class:`Spec` is that field bound to its widget (its
default, range and choices read from the built widget, ``query.bind``). :func:`read` turns a query's text into the
widget's value with checks: a value that is no number, out of range or not a choice gives the widget's default and
one sentence saying so (the page shows it as a warning); a text longer than a link may carry is cut, and says so.
:func:`write` turns a widget's value back into the query's text (None: leave the key out). No Gradio here.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

TEXT_CHARS = 4000          # the longest text a link carries (a longer one is cut on both sides of the link)
SHORT_CHARS = 200          # a short field's (a target word, a treebank's name, a relation)
NO_CEILING = 100_000       # a number box with no maximum of its own: a link still names nothing larger
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
SHOWN_CHOICES = 8          # a warning lists at most this many of the choices


class Kind(StrEnum):
    """How a field's value is read and written."""

    TEXT = "text"          # free text, cut to ``Field.chars``
    NUMBER = "number"      # a number in the widget's range (a whole number when the widget steps by whole numbers)
    CHOICE = "choice"      # one of the widget's choices
    FLAG = "flag"          # a checkbox: 1 or 0
    NUMBERS = "numbers"    # whole numbers, comma-separated (the heads drawn in the head view)
    TOKEN = "token"        # one of the widget's choices or a token position (the neighbours' token)
    MODEL = "model"        # a model key, checked by the picker's rules (``models.py``)


@dataclass(frozen=True)
class Field:
    """A link's field: its query ``key``, the ``path`` of its widget in the tab's ``build`` dict (``("neuron",
    "query")`` is ``built["neuron"]["query"]``; ``("@picker",)`` the model picker), its ``kind``, the ``label``
    its messages use, ``chars`` (a text's longest), ``low`` (overrides the widget's minimum) and ``top``: the name
    of a model limit (``models.LIMITS``: ``layer``, ``head``, ``position``) that caps its range."""

    key: str
    path: tuple[str, ...]
    kind: Kind
    label: str
    chars: int = TEXT_CHARS
    low: float | None = None
    top: str | None = None


@dataclass(frozen=True)
class Spec:
    """A field bound to its built widget: the widget's ``default``, range (``low``..``high``, ``whole`` numbers or
    not) and ``choices`` (values)."""

    field: Field
    default: Any = None
    low: float | None = None
    high: float | None = None
    whole: bool = True
    choices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The field's query key."""
        return self.field.key


def _number(raw: str) -> float | None:
    """``raw`` as a finite number, or None."""
    try:
        value = float(raw.strip())
    except (ValueError, AttributeError):
        return None
    return value if math.isfinite(value) else None


def bounds(spec: Spec, limits: Mapping[str, float]) -> tuple[float, float]:
    """The range a link may name for ``spec``: the widget's, capped by the model's ``limits`` (``Field.top``)."""
    low = spec.low if spec.low is not None else 0
    high = spec.high if spec.high is not None else NO_CEILING
    if spec.field.top is not None and spec.field.top in limits:
        high = min(high, limits[spec.field.top])
    return low, max(low, high)


def _fitted_default(spec: Spec, limits: Mapping[str, float]) -> Any:
    """The widget's default, inside the range ``limits`` leave (a default of 12 layers on a 2-layer model is 2)."""
    if spec.field.kind is not Kind.NUMBER or not isinstance(spec.default, (int, float)):
        return spec.default
    low, high = bounds(spec, limits)
    value = min(max(spec.default, low), high)
    return int(value) if spec.whole else value


def _shown(value: float) -> str:
    """A number as a message writes it: ``3``, not ``3.0``."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _range_sentence(spec: Spec, raw: str, low: float, high: float, default: Any) -> str:
    kind = "a whole number" if spec.whole else "a number"
    shown_default = _shown(default) if isinstance(default, (int, float)) and not isinstance(default, bool) else default
    return (f"The link's {spec.field.label} must be {kind} from {_shown(low)} to {_shown(high)}, not "
            f"{raw[:40]!r}: {spec.field.label} {shown_default} is shown instead.")


def _read_number(spec: Spec, raw: str, limits: Mapping[str, float]) -> tuple[Any, str | None]:
    low, high = bounds(spec, limits)
    value, default = _number(raw), _fitted_default(spec, limits)
    if value is None or (spec.whole and not value.is_integer()) or not low <= value <= high:
        return default, _range_sentence(spec, raw, low, high, default)
    return (int(value) if spec.whole else value), None


def _read_numbers(spec: Spec, raw: str, limits: Mapping[str, float]) -> tuple[Any, str | None]:
    low, high = bounds(spec, limits)
    parts = [p for p in raw.split(",") if p.strip()]
    values = [_number(p) for p in parts]
    if not parts or any(v is None or not v.is_integer() or not low <= v <= high for v in values):
        return spec.default, (f"The link's {spec.field.label} must be whole numbers from {_shown(low)} to "
                              f"{_shown(high)}, comma-separated, not {raw[:40]!r}: the default is shown instead.")
    return list(dict.fromkeys(int(v) for v in values if v is not None)), None


def _choice_sentence(spec: Spec, raw: str) -> str:
    names = ", ".join(str(c) for c in spec.choices[:SHOWN_CHOICES]) + (", ..." if len(spec.choices) > SHOWN_CHOICES
                                                                        else "")
    return (f"The link's {spec.field.label} {raw[:40]!r} is not one of {names}: {spec.default} is shown "
            "instead.")


def _read_token(spec: Spec, raw: str, limits: Mapping[str, float]) -> tuple[Any, str | None]:
    if raw in spec.choices:
        return raw, None
    value, (low, high) = _number(raw), bounds(spec, limits)
    if value is not None and value.is_integer() and low <= value <= high:
        return str(int(value)), None
    return spec.default, (f"The link's {spec.field.label} {raw[:40]!r} is neither a token position from "
                          f"{_shown(low)} to {_shown(high)} nor one of {', '.join(map(str, spec.choices))}: "
                          f"{spec.default} is shown instead.")


def read(spec: Spec, raw: str, limits: Mapping[str, float]) -> tuple[Any, str | None]:
    """``raw`` (a query's text for ``spec``) as the widget's value, and None; or the widget's default (a text: its
    first ``chars`` characters) and the sentence that says why. ``limits``: the picked model's (``models.LIMITS``).
    A model key is read as it is (``models.py`` checks it)."""
    kind = spec.field.kind
    if kind in (Kind.TEXT, Kind.MODEL):
        if len(raw) > spec.field.chars:
            return raw[:spec.field.chars], (f"The link's {spec.field.label} was cut to {spec.field.chars:,} "
                                            "characters (the most a link carries).")
        return raw, None
    if kind is Kind.NUMBER:
        return _read_number(spec, raw, limits)
    if kind is Kind.NUMBERS:
        return _read_numbers(spec, raw, limits)
    if kind is Kind.TOKEN:
        return _read_token(spec, raw, limits)
    if kind is Kind.FLAG:
        word = raw.strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE, None
        return bool(spec.default), (f"The link's {spec.field.label} must be 1 or 0, not {raw[:40]!r}: the "
                                    "default is shown instead.")
    if raw in spec.choices:
        return raw, None
    return spec.default, _choice_sentence(spec, raw)


def write(spec: Spec, value: Any) -> str | None:
    """``value`` (what the widget holds) as the query's text for ``spec``; None leaves the key out (an empty text,
    no value, a number that is not one)."""
    kind = spec.field.kind
    if value is None:
        return None
    if kind in (Kind.TEXT, Kind.MODEL, Kind.CHOICE, Kind.TOKEN):
        text = str(value)
        return text if text.strip() else None
    if kind is Kind.FLAG:
        return "1" if value else "0"
    if kind is Kind.NUMBERS:
        numbers = [_number(str(v)) for v in (value if isinstance(value, Sequence) and not isinstance(value, str)
                                             else [value])]
        kept = [_shown(v).replace(",", "") for v in numbers if v is not None]
        return ",".join(kept) if kept else None
    number = _number(str(value))
    if number is None:
        return None
    return str(int(number)) if number.is_integer() else f"{number:g}"
