"""The Embeddings tab's canvas views (hidden dimensions, position similarity): what Python sends the browser.

Python prepares, the browser draws (docs/design/browser-views.md, "The Embeddings tab's maps"). One
``/embeddings`` answer carries, for one input, compact arrays (``explorer.views.browser_arrays``) that
``assets/embeddings_view.js`` draws on ``<canvas>`` with a diverging palette:

* the **hidden dimensions** value (S tokens x H dimensions, signed): each component as ``uint8`` of
  ``v - offset`` (``offset`` = its minimum, ``scale`` = max - min), read back as ``offset + q * scale / 255``,
  within ``(max - min) / 510`` of the engine's value; every component (``COMPONENTS``) when ``5 * S * H`` fits
  ``ALL_COMPONENTS_BUDGET`` values, else the chosen one. A component change the page holds redraws there with
  no request; else the view fires ``fetch`` and the server answers with that component alone, read from the
  kept result (no model run);
* the **position similarity** value (P x P cosines in [-1, 1]) as ``float16`` (within 2**-11 ≈ 0.0005).

Colours: value ``v`` is drawn at palette level ``round((v + limit) / (2 * limit) * 255)`` (clipped), where
``limit`` is the 99th percentile of ``|v|`` for a component (a few outlier dimensions saturate instead of
washing the rest out) and 1 for cosines; :func:`levels` is that rule in Python (the tests compare a PNG's pixels
with it). Pure functions (no Gradio) but for :func:`component`.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult
from explorer.views.canvas_view import canvas_html, view_script
from explorer.views import browser_arrays as browser_arrays
from explorer.views.browser_arrays import LEVELS, encode
from explorer.views.export_names import export_info
from explorer.embeddings.plots import COMPONENT_LABELS

ALL_COMPONENTS_BUDGET = 1_200_000   # values: all five components at once when 5 x S x H fits (bundled model: 512 tokens)
MIN_WIDTH = 320                    # CSS px: a row with a map wraps on a phone rather than squeeze it
CLIP_QUANTILE = 0.99               # the colour range of a component: this quantile of |value|
SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "embeddings_view.js"
KINDS = ("dimensions", "similarity")


def palette() -> list[str]:
    """The 256 colours of the diverging scale (Plotly's ``RdBu_r``: blue for negative, white at 0, red for
    positive) as ``#rrggbb``, level 0 = ``-limit``, 255 = ``+limit``."""
    from plotly.colors import sample_colorscale, unlabel_rgb

    colors = sample_colorscale("RdBu_r", [i / LEVELS for i in range(LEVELS + 1)])
    return ["#{:02x}{:02x}{:02x}".format(*(int(round(c)) for c in unlabel_rgb(color))) for color in colors]


def color_limit(values: np.ndarray) -> float:
    """The colour range ``[-limit, limit]`` of a signed map: the 99th percentile of ``|values|`` (else its
    largest, else 1.0)."""
    magnitude = np.abs(np.asarray(values, dtype=np.float32))
    if magnitude.size == 0:
        return 1.0
    return float(np.quantile(magnitude, CLIP_QUANTILE)) or float(magnitude.max()) or 1.0


def levels(values: np.ndarray, limit: float) -> np.ndarray:
    """The palette level (0..255) of each value, as the browser picks it: ``-limit`` -> 0, ``+limit`` -> 255."""
    t = (np.asarray(values, dtype=np.float64) + limit) / (2 * limit)
    return np.clip(np.floor(t * LEVELS + 0.5), 0, LEVELS).astype(np.uint8)     # JavaScript's Math.round


def signed_map(values: np.ndarray, limit: float | None = None) -> dict[str, Any]:
    """One signed map for the browser: ``uint8`` of ``values - offset`` with ``offset`` (the minimum) beside it,
    and its colour ``limit``; the browser reads ``offset + q * scale / 255``."""
    values = np.asarray(values, dtype=np.float32)
    offset = float(values.min()) if values.size else 0.0
    return {"offset": offset, "limit": color_limit(values) if limit is None else float(limit),
            "data": encode(values - offset, "uint8")}


def cosine_map(matrix: np.ndarray) -> dict[str, Any]:
    """A map of cosines in [-1, 1]: ``float16`` (3 significant digits), offset 0, colour limit 1."""
    return {"offset": 0.0, "limit": 1.0, "data": encode(np.clip(matrix, -1.0, 1.0), "float16")}


def decoded(entry: dict[str, Any]) -> np.ndarray:
    """The values the browser reads from one map of a view's value (``offset`` + the decoded array)."""
    return np.float32(entry["offset"]) + browser_arrays.decode(entry["data"])


def map_precision(entry: dict[str, Any]) -> float:
    """The largest difference between an engine value and what the browser reads from ``entry``."""
    return browser_arrays.precision(entry["data"]) + abs(float(entry["offset"])) * 2.0 ** -23


def result_id(result: EmbeddingsResult) -> str:
    """The views' ``id`` of one input's result (model, text, pair, length, tokens): a fetched component with the
    same ``id`` joins the ones the page holds; another ``id`` replaces them."""
    key = (result.source, result.text, result.text_pair, result.max_length, tuple(result.tokens),
           result.word.shape)
    return hashlib.sha1(repr(key).encode("utf-8")).hexdigest()[:12]


def components_sent(num_tokens: int, hidden: int, chosen: str) -> list[str]:
    """The components one answer sends: all five when they fit ``ALL_COMPONENTS_BUDGET``, else ``chosen``."""
    if len(COMPONENTS) * num_tokens * hidden <= ALL_COMPONENTS_BUDGET:
        return list(COMPONENTS)
    return [chosen]


def dimensions_value(result: EmbeddingsResult, component: str, only: Sequence[str] | None = None) -> dict[str, Any]:
    """The hidden-dimensions view's value: tokens, the chosen component, and the maps (S, H) of the components
    that fit (``only``: exactly these, e.g. the one a ``fetch`` asks for); ``export``: the model and the input the
    exports are named after (the position-similarity map, sent beside it, takes them from it)."""
    names = list(only) if only is not None else components_sent(len(result.tokens), result.word.shape[1], component)
    return {"kind": "dimensions", "id": result_id(result), "component": component,
            "rows": [f"{i}: {t}" for i, t in enumerate(result.tokens)], "columns": int(result.word.shape[1]),
            "row_title": "position: token", "column_title": "dimension", "value_name": "value",
            "titles": {name: f"Hidden dimensions: {COMPONENT_LABELS[name]}" for name in COMPONENTS},
            "maps": {name: signed_map(result.component(name)) for name in names},
            "palette": palette(), "file": "embeddings-dimensions",
            "export": export_info(result.source, result.text, result.text_pair)}


def similarity_value(matrix: np.ndarray, title: str | None = None) -> dict[str, Any]:
    """The position-similarity view's value: the P x P cosine matrix (float16) and its labels."""
    matrix = np.asarray(matrix, dtype=np.float32)                                # (P, P)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"the similarity matrix must be square, got {matrix.shape}")
    num = matrix.shape[0]
    title = title or f"Cosine similarity of the first {num} position embeddings"
    return {"kind": "similarity", "id": hashlib.sha1(matrix.tobytes()).hexdigest()[:12], "component": "cosine",
            "rows": [str(i) for i in range(num)], "columns": num, "row_title": "position",
            "column_title": "position", "value_name": "cosine", "titles": {"cosine": title},
            "maps": {"cosine": cosine_map(matrix)}, "palette": palette(), "file": "embeddings-position-similarity"}


def template(kind: str) -> str:
    """The static HTML the script fills (static: Gradio re-renders a changed template over the drawing)."""
    return (f'<div class="emb-view emb-{kind}" data-kind="{kind}">'
            '<div class="emb-caption"></div><div class="emb-controls"></div>'
            '<div class="emb-scroll"><canvas class="emb-canvas" role="img"></canvas></div>'
            '<div class="emb-tip" role="status"></div></div>')


def script(kind: str) -> str:
    """``js_on_load`` for one view: the shared decoder and this script (each defined once per page), then the
    view's mount."""
    if kind not in KINDS:
        raise ValueError(f"unknown view {kind!r}")
    return view_script(SCRIPT, f"window.BertEmbeddingsViews.mount({kind!r}, element, props, trigger, watch);")


def component(kind: str, label: str) -> Any:
    """The ``gr.HTML`` of one view (``kind`` in ``KINDS``) whose value is a dict (the API says so); the dimensions
    view fires ``fetch`` when the page lacks the chosen component's map."""
    return canvas_html(label, template(kind), script(kind), f"the {kind} map's arrays",
                       ["embeddings-canvas", f"embeddings-{kind}"], min_width=MIN_WIDTH)
