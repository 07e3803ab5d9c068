"""Numbers as the UI prints them: percentages and 3 significant digits, never 17 digits."""
from __future__ import annotations

import math

import pytest

from explorer.formatting import percent, rounded, sig, signed_percent


@pytest.mark.parametrize("value, text", [
    (0.123456789, "12.3%"), (0.0012345, "0.123%"), (1.0, "100%"), (0.5, "50%"), (0.999999, "100%"),
    (0.0, "0%"), (1e-9, "<0.001%"), (math.nan, "–"), (math.inf, "–"),
])
def test_percent(value: float, text: str) -> None:
    assert percent(value) == text


@pytest.mark.parametrize("value, text", [
    (3.14159265, "3.14"), (0.000123456, "0.000123"), (1234.5, "1234"), (-2.5, "-2.5"), (0.0, "0"),
    (12_345_678.0, "1.23e+07"), (1e-7, "1.00e-07"), (0.30000000000000004, "0.3"), (math.nan, "–"),
])
def test_sig(value: float, text: str) -> None:
    assert sig(value) == text


def test_rounded_keeps_numbers_numbers() -> None:
    assert rounded(0.123456789) == 0.123 and rounded(1234.5) == 1230.0 and rounded(-0.00098765) == -0.000988
    assert rounded(0.0) == 0.0 and math.isnan(rounded(math.nan))
    assert len(repr(rounded(0.1 + 0.2))) <= 5


@pytest.mark.parametrize("value, text", [
    (0.0312, "+3.12%"), (-0.005, "−0.5%"), (1e-9, "+<0.001%"), (-1e-9, "−<0.001%"), (0.0, "0%"), (math.nan, "–"),
])
def test_signed_percent(value: float, text: str) -> None:
    assert signed_percent(value) == text
