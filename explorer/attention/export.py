"""Export one head's attention map as SVG, PNG and JSON, with no browser.

Plotly's server-side image export needs ``kaleido`` and a browser, which this app does not
ship. So the SVG is written here (cells, token labels by position, a colour bar), and the
PNG is a plain pixel image of the cells (encoded by Pillow, one square per weight; no text),
using the same colours as the on-screen heatmap. A PNG *with* labels comes from the camera
button on the plot itself (Plotly draws it in the browser). Pure functions, no Gradio.
"""
from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
from PIL import Image
from plotly.colors import unlabel_rgb

from explorer.plots import COLORSCALE
from explorer.views.browser_arrays import LEVELS

MAX_PNG_SIDE = 2048     # pixels
SVG_CELL = 18           # pixels per cell in the SVG
JSON_DIGITS = 6


_STOPS = np.array([s for s, _ in COLORSCALE])
_COLORS = np.array([unlabel_rgb(c) for _, c in COLORSCALE], dtype=float)  # (K, 3)


def colors(values: np.ndarray) -> np.ndarray:
    """Weights in [0, 1] -> uint8 RGB ``(..., 3)`` on the heatmap's colour scale (clipped)."""
    v = np.clip(np.nan_to_num(np.asarray(values, dtype=float)), 0.0, 1.0)
    channels = [np.interp(v, _STOPS, _COLORS[:, c]) for c in range(3)]
    return np.rint(np.stack(channels, axis=-1)).astype(np.uint8)              # (..., 3)


def drawn(values: np.ndarray) -> np.ndarray:
    """Weights as the canvas views draw them (``explorer.attention.canvas``): rounded to the uint8 level of
    ``explorer.views.browser_arrays`` (scale 1.0), so an exported pixel and a drawn cell are the same colour."""
    v = np.clip(np.nan_to_num(np.asarray(values, dtype=float)), 0.0, 1.0)
    return np.rint(v * LEVELS) / LEVELS


def _hex(rgb: Sequence[int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(int(c) for c in rgb))


def heatmap_png(attn: np.ndarray, cell: int = 12) -> bytes:
    """An RGB PNG of the (S, S) map: ``cell`` x ``cell`` pixels per weight (smaller for long inputs)."""
    attn = np.asarray(attn, dtype=float)
    if attn.ndim != 2 or attn.shape[0] != attn.shape[1] or attn.shape[0] == 0:
        raise ValueError(f"an attention map must be square and non-empty, got shape {attn.shape}")
    cell = max(1, min(int(cell), MAX_PNG_SIDE // attn.shape[0]))
    pixels = np.repeat(np.repeat(colors(drawn(attn)), cell, axis=0), cell, axis=1)  # (S*cell, S*cell, 3)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def heatmap_svg(attn: np.ndarray, tokens: Sequence[str], title: str = "") -> str:
    """A standalone SVG of the (S, S) map: rows = queries, columns = keys, labelled by position."""
    attn = np.asarray(attn, dtype=float)
    n = len(tokens)
    if attn.shape != (n, n) or n == 0:
        raise ValueError(f"the map {attn.shape} does not match {n} tokens")
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    label_width = 7 * max(len(label) for label in labels) + 12
    left, top, c = label_width, label_width + (30 if title else 10), SVG_CELL
    bar_x = left + n * c + 20
    width, height = bar_x + 60, top + n * c + 20
    fill = colors(drawn(attn))                                                # (S, S, 3)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        parts.append(f'<text x="{left}" y="18" font-size="14" font-weight="bold">{escape(title)}</text>')
    for i in range(n):
        y = top + i * c
        parts.append(f'<text x="{left - 6}" y="{y + c * 0.7:.1f}" text-anchor="end">{escape(labels[i])}</text>')
        x = left + i * c + c * 0.7
        parts.append(f'<text x="{x:.1f}" y="{top - 6}" transform="rotate(-90 {x:.1f} {top - 6})">'
                     f'{escape(labels[i])}</text>')
        for j in range(n):
            parts.append(f'<rect x="{left + j * c}" y="{y}" width="{c}" height="{c}" fill="{_hex(fill[i, j])}">'
                         f'<title>{escape(labels[i])} → {escape(labels[j])}: {attn[i, j]:.3f}</title></rect>')
    steps = 20
    for k in range(steps):                                                    # colour bar, 1 at the top
        value = 1 - (k + 0.5) / steps
        parts.append(f'<rect x="{bar_x}" y="{top + k * n * c / steps:.2f}" width="14" '
                     f'height="{n * c / steps + 0.5:.2f}" fill="{_hex(colors(np.array(value)))}"/>')
    parts.append(f'<text x="{bar_x + 18}" y="{top + 10}">1</text>')
    parts.append(f'<text x="{bar_x + 18}" y="{top + n * c}">0</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _clean(value: Any) -> Any:
    """numpy -> plain JSON types, floats rounded, NaN/inf -> None."""
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return round(value, JSON_DIGITS) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def attention_json(tokens: Sequence[str], layer: int, head: int, attention: np.ndarray,
                   stats: Mapping[str, float], **extra: Any) -> str:
    """``{"tokens", "layer", "head", "attention", "stats", ...extra}`` as indented JSON."""
    payload = {"tokens": list(tokens), "layer": int(layer), "head": int(head), "attention": attention,
               "stats": dict(stats), **extra}
    return json.dumps(_clean(payload), indent=1, ensure_ascii=False)


def write_exports(directory: str | Path, stem: str, attn: np.ndarray, tokens: Sequence[str], layer: int,
                  head: int, stats: Mapping[str, float], title: str = "", **extra: Any) -> list[Path]:
    """Write ``<stem>.png``, ``<stem>.svg`` and ``<stem>.json`` into ``directory``; return their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    png, svg, js = (directory / f"{stem}.{ext}" for ext in ("png", "svg", "json"))
    png.write_bytes(heatmap_png(attn))
    svg.write_text(heatmap_svg(attn, tokens, title), encoding="utf-8")
    js.write_text(attention_json(tokens, layer, head, attn, stats, **extra), encoding="utf-8")
    return [png, svg, js]
