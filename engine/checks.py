"""The engine's one check of "is this a whole number / a number" for arguments and config fields.

Python counts ``True`` as the int 1, so ``isinstance(x, int)`` lets booleans through; these
helpers never do. Call sites keep their own error wording (it names the field and its range);
``require_int`` is the shared wording for the plain "must be an int" ``TypeError``.
"""
from __future__ import annotations

import math
import numbers


def is_int(value: object, numpy_ints: bool = False) -> bool:
    """True for an ``int`` that is not a ``bool``; with ``numpy_ints`` also NumPy's integers (``np.int64``)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral if numpy_ints else int)


def require_int(value: object, name: str, numpy_ints: bool = False) -> None:
    """Raise ``TypeError("<name> must be an int, got <type>")`` unless ``is_int(value, numpy_ints)``."""
    if not is_int(value, numpy_ints):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")


def is_whole_number(value: object) -> bool:
    """True for a real number with a finite whole value: ``3``, ``3.0`` (a slider's) and ``np.int64(3)``;
    False for ``3.5``, infinity, NaN, ``True`` and anything that is not a number."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    if isinstance(value, numbers.Integral):
        return True
    number = float(value)
    return math.isfinite(number) and number.is_integer()


def is_finite_number(value: object) -> bool:
    """True for a finite ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
