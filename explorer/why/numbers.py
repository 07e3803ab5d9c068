"""How the Why tab prints a number: a probability (or a share of one) as a percentage, anything else (a logit,
an attribution to a logit, a convergence delta) as a plain decimal. Never an exponent ("1.2e-05"), which a
learner cannot read. Pure strings, no Gradio.
"""
from __future__ import annotations

import math

from explorer.formatting import SIGNIFICANT, sig, signed_percent

TINY = 1e-6                    # below this size a plain decimal prints as "≈0"


def decimal(value: float, digits: int = SIGNIFICANT) -> str:
    """``value`` to ``digits`` significant digits, written out: 3.14159 -> "3.14", 1.234e-05 -> "0.0000123",
    -0.5 -> "-0.5"; a size below ``TINY`` -> "≈0", 0 -> "0"; not finite -> "–". Never an exponent."""
    if not math.isfinite(value):
        return "–"
    if value == 0:
        return "0"
    if abs(value) < TINY:
        return "≈0"
    if abs(value) >= 1e-4:
        text = sig(value, digits)
        return text if "e" not in text else f"{value:.0f}"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{value:.{places}f}".rstrip("0").rstrip(".")


def shown(value: float | None, percent_points: bool = False) -> str:
    """An attribution, a difference or a delta as the tab prints it: signed percentage points when the
    explained score is a probability ("+0.0012%"), else a plain decimal; None -> "–"."""
    if value is None:
        return "–"
    return signed_percent(value) if percent_points else decimal(value)
