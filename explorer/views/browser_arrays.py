"""Arrays for the browser: a numpy array as a small JSON-ready dict of base64 bytes, its shape and dtype.

Two encodings (docs/design/browser-views.md):

* ``uint8``: ``q = round(v / scale * 255)``, clipped to 0..255, with ``scale`` sent beside it (the largest value,
  or one given, such as 1.0 for attention weights); the browser reads ``q * scale / 255``, within
  ``scale / 510`` of the value (:func:`precision`). Negative values are not allowed in this encoding.
* ``float16``: IEEE half floats, little-endian (the browser reads them with a small decoder): about 3
  significant digits, for values of any sign.

Either's bytes are deflated (zlib format, level 6) before base64 when that makes them at least 10% smaller and
they are at least ``DEFLATE_MIN_BYTES`` long (attention maps are mostly near zero: 0.1-0.35 of their size);
``compression`` says which (``"deflate"`` or ``"none"``), and the browser inflates with its built-in
``DecompressionStream("deflate")``.

No torch here (``explorer/`` never imports it); numpy array picking and encoding only. :func:`decode` is the
browser's reading in Python, for tests and for anyone calling the API from Python.
"""
from __future__ import annotations

import base64
import zlib
from pathlib import Path
from typing import Any, Literal

import numpy as np

Encoding = Literal["uint8", "float16"]
Compression = Literal["deflate", "none"]
LEVELS = 255                   # uint8 steps between 0 and ``scale``
DEFLATE_MIN_BYTES = 1024       # smaller arrays go as they are (deflate's header and the browser's await cost more)
DEFLATE_LEVEL = 6              # zlib's default: 0.12 of a 512-token map in ~20 ms; level 9 saves 10% more at 20x the time
SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "browser_arrays.js"   # the browser's decode
DEFLATE_GAIN = 0.9             # deflated only when at most this fraction of the raw bytes


def encode(values: Any, dtype: Encoding = "uint8", scale: float | None = None,
           compress: bool = True) -> dict[str, Any]:
    """``{"dtype", "shape", "scale", "compression", "data"}`` for ``values`` (any shape; row-major bytes, deflated
    when ``compress`` and it helps, as base64).

    ``uint8`` quantises ``[0, scale]`` into 256 steps (``scale`` defaults to the largest value, 1.0 for an
    all-zero array); ``float16`` keeps the sign and ~3 significant digits (``scale`` is 1.0 and unused). NaN and
    infinities are refused: the browser could not draw them.
    """
    array = np.asarray(values, dtype=np.float32)
    if not np.all(np.isfinite(array)):
        raise ValueError("an array for the browser must be finite (no NaN or infinity)")
    if dtype == "float16":
        data, scale_out = array.astype("<f2").tobytes(), 1.0
    elif dtype == "uint8":
        if array.size and float(array.min()) < 0:
            raise ValueError("the uint8 encoding is for values >= 0; use float16 for signed values")
        top = float(array.max()) if array.size else 0.0
        scale_out = float(scale) if scale is not None else (top if top > 0 else 1.0)
        if not scale_out > 0:
            raise ValueError(f"the uint8 scale must be positive, got {scale_out}")
        data = np.clip(np.rint(array * (LEVELS / scale_out)), 0, LEVELS).astype(np.uint8).tobytes()
    else:
        raise ValueError(f"unknown encoding {dtype!r}: choose uint8 or float16")
    data, compression = _deflated(data) if compress else (data, "none")
    return {"dtype": dtype, "shape": list(array.shape), "scale": scale_out, "compression": compression,
            "data": base64.b64encode(data).decode("ascii")}


def _deflated(data: bytes) -> tuple[bytes, Compression]:
    """(the bytes to send, how): zlib-deflated when long enough and at least 10% smaller, else as they are."""
    if len(data) < DEFLATE_MIN_BYTES:
        return data, "none"
    packed = zlib.compress(data, DEFLATE_LEVEL)
    return (packed, "deflate") if len(packed) <= DEFLATE_GAIN * len(data) else (data, "none")


def decode(payload: dict[str, Any]) -> np.ndarray:
    """The float32 array the browser reads from an :func:`encode` payload (the same arithmetic as
    ``assets/attention_view.js``'s ``decode``); a payload without ``compression`` is read as not compressed."""
    raw = base64.b64decode(payload["data"])
    compression = payload.get("compression", "none")
    if compression == "deflate":
        raw = zlib.decompress(raw)
    elif compression != "none":
        raise ValueError(f"unknown compression {compression!r}")
    shape = tuple(int(n) for n in payload["shape"])
    if payload["dtype"] == "float16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(shape)
    if payload["dtype"] == "uint8":
        step = np.float32(payload["scale"]) / np.float32(LEVELS)
        return (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) * step).reshape(shape)
    raise ValueError(f"unknown encoding {payload['dtype']!r}")


def precision(payload: dict[str, Any]) -> float:
    """The largest difference between a value and what :func:`decode` gives back, for values in range: half a
    step for ``uint8`` (``scale / 510``); for ``float16`` the relative error 2**-11 times the largest value."""
    if payload["dtype"] == "uint8":
        return float(payload["scale"]) / (2 * LEVELS) + 1e-7
    values = decode(payload)
    return float(np.abs(values).max(initial=0.0)) * 2.0 ** -11 + 1e-7


def size(payload: dict[str, Any]) -> int:
    """Bytes of the base64 text the browser receives for this array (after deflate, when deflated)."""
    return len(payload["data"])


def script() -> str:
    """The browser's decoder (``window.BertArrays.decode(payload)`` → ``{shape, raw, get(i)}``, defined once per
    page): a canvas view puts it before its own script in ``js_on_load``."""
    return SCRIPT.read_text(encoding="utf-8")
