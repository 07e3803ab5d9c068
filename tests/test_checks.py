"""engine.checks: the one whole-number / number check (booleans are never numbers here)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.checks import is_finite_number, is_int, is_whole_number, require_int


@pytest.mark.parametrize("value, plain, numpy", [
    (3, True, True), (0, True, True), (-2, True, True), (True, False, False), (False, False, False),
    (3.0, False, False), (np.int64(3), False, True), ("3", False, False), (None, False, False),
])
def test_is_int_refuses_bools_and_takes_numpy_ints_only_when_asked(value, plain, numpy) -> None:
    assert is_int(value) is plain
    assert is_int(value, numpy_ints=True) is numpy


def test_require_int_names_the_argument_and_the_type() -> None:
    require_int(7, "top_k")
    require_int(np.int32(7), "top_k", numpy_ints=True)
    with pytest.raises(TypeError, match="^top_k must be an int, got bool$"):
        require_int(True, "top_k")
    with pytest.raises(TypeError, match="^max_length must be an int, got float$"):
        require_int(2.0, "max_length")
    with pytest.raises(TypeError, match="^k must be an int, got int64$"):
        require_int(np.int64(2), "k")


@pytest.mark.parametrize("value, whole", [
    (3, True), (3.0, True), (-1.0, True), (np.int64(4), True), (np.float32(5.0), True), (10**400, True),
    (3.5, False), (float("inf"), False), (float("nan"), False), (True, False), ("3", False), (None, False),
])
def test_is_whole_number_takes_integral_floats_as_sliders_send(value, whole) -> None:
    assert is_whole_number(value) is whole


@pytest.mark.parametrize("value, finite", [
    (1, True), (0.5, True), (-2.0, True), (True, False), (float("inf"), False), (float("nan"), False),
    ("1", False), (None, False),
])
def test_is_finite_number(value, finite) -> None:
    assert is_finite_number(value) is finite
