"""How numbers and text read in the UI: probabilities as percentages, everything else to 3 significant digits;
tokens and typed text in Markdown shown as they are (``code``, ``plain_markdown``: RoBERTa's ``<mask>`` is no tag).

One place for it, so every tab prints a score the same way (never ``0.12345678901234567``).
"""
from __future__ import annotations

import math
import re

SIGNIFICANT = 3
SMALLEST_PERCENT = 0.001   # below this many percent a probability prints as "<0.001%"


def percent(probability: float) -> str:
    """A probability in [0, 1] as a percentage with 3 significant digits: 0.12345 -> "12.3%",
    0.0012345 -> "0.123%", 1.0 -> "100%", 1e-9 -> "<0.001%"; not finite -> "–"."""
    if not math.isfinite(probability):
        return "–"
    value = probability * 100.0
    if 0 < abs(value) < SMALLEST_PERCENT:
        return f"<{SMALLEST_PERCENT:g}%"
    return f"{value:.{SIGNIFICANT}g}%"


def signed_percent(change: float) -> str:
    """A change of probability (percentage points) with its sign: 0.0312 -> "+3.12%", -0.005 -> "−0.5%",
    a tiny one -> "+<0.001%" / "−<0.001%", 0 -> "0%"; not finite -> "–". Never an exponent."""
    if not math.isfinite(change):
        return "–"
    if change == 0:
        return "0%"
    return ("+" if change > 0 else "−") + percent(abs(change))


def sig(value: float, digits: int = SIGNIFICANT) -> str:
    """``value`` to ``digits`` significant digits, without an exponent for ordinary sizes:
    3.14159 -> "3.14", 0.00012345 -> "0.000123", 1234.5 -> "1234" (whole digits are kept),
    12345678 -> "1.23e+07"; not finite -> "–"."""
    if not math.isfinite(value):
        return "–"
    if value == 0 or 1e-4 <= abs(value) < 1e6:
        text = f"{value:.{digits}g}"
        if "e" in text:                      # 1234.5 -> "1.23e+03": write it out instead
            text = f"{value:.0f}"
        return text
    return f"{value:.{digits - 1}e}"


def rounded(value: float, digits: int = SIGNIFICANT) -> float:
    """``value`` rounded to ``digits`` significant digits, for tables (a number stays a number)."""
    if not math.isfinite(value) or value == 0:
        return value
    return round(value, digits - 1 - int(math.floor(math.log10(abs(value)))))


def code(text: str) -> str:
    """``text`` as inline Markdown code, whatever backticks it holds: a token such as ``<mask>`` shows as it is."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def plain_markdown(text: str) -> str:
    """``text`` with Markdown's special characters escaped, so it shows as typed."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)
