"""The neuron view on ``<canvas>``: what Python sends the browser for it (docs/design/browser-views.md, *The
neuron view*).

One answer holds, for one input, every token's query and key vectors of one head -- ``(S, hd)`` each, float16
(``explorer.views.browser_arrays``) -- or of every layer x head when they fit ``ALL_HEADS_BUDGET`` values. From them
``assets/neuron_view.js`` computes, for whichever query token the user clicks, the products q ⊙ k_j, the scaled
dot products and their softmax, and draws them: picking another query token asks the server nothing, nor does a
layer or head the page holds; one it lacks comes alone (``fetch`` on the heatmap's ``neuron`` event).

Pure functions (no Gradio) but for :func:`component`, which makes the ``gr.HTML`` that runs the script.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from engine.probes.attention.neuron_view import NeuronInputs
from explorer.views.canvas_view import canvas_html, view_script
from explorer.views import browser_arrays as browser_arrays
from explorer.views.browser_arrays import encode
from explorer.views.export_names import export_info

ALL_HEADS_BUDGET = 100_000      # q and k values (float16: 2 bytes each) sent at once when every head fits
WINDOW = 40                     # the view shows this many key tokens at a time (a window the user slides)
SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "neuron_view.js"


def chosen_heads(num_layers: int, num_heads: int, seq_len: int, head_size: int, layer: int,
                 head: int) -> list[tuple[int, int]]:
    """(layer, head) pairs, engine indices, whose vectors one answer sends: every one when their queries and keys
    fit ``ALL_HEADS_BUDGET`` values, else the chosen head alone."""
    if 2 * num_layers * num_heads * seq_len * head_size <= ALL_HEADS_BUDGET:
        return [(l, h) for l in range(num_layers) for h in range(num_heads)]
    return [(int(layer), int(head))]


def row(query_vector: np.ndarray, key_vectors: np.ndarray) -> dict[str, np.ndarray]:
    """What the browser computes for one query (float64, as JavaScript does): ``products`` (S, hd), ``scores``
    (S,) = Σ products / √hd and ``weights`` (S,), their softmax."""
    q, k = np.asarray(query_vector, dtype=np.float64), np.asarray(key_vectors, dtype=np.float64)
    products = q[None, :] * k                                                       # (S, hd)
    scores = products.sum(axis=-1) / math.sqrt(q.shape[0])                          # (S,)
    weights = np.exp(scores - scores.max())
    return {"products": products, "scores": scores, "weights": weights / weights.sum()}


def value(inputs: NeuronInputs, layer: int, head: int, query: int | None, view_id: str,
          heads: list[tuple[int, int]] | None = None, summary: str = "") -> dict[str, Any]:
    """The neuron view's value: tokens, the shape, the chosen (``layer``, ``head``) (engine indices) and
    ``query`` (None: the page keeps its own), and ``queries`` / ``keys`` ``(len(heads), S, hd)`` float16 for
    ``heads`` (:func:`chosen_heads` when None); ``summary`` is the chosen row in words, for API callers; ``export``
    names the model and the input (the exports' file names and titles)."""
    num_layers, num_heads, seq_len, head_size = inputs.queries.shape                # (L, nh, S, hd)
    if heads is None:
        heads = chosen_heads(num_layers, num_heads, seq_len, head_size, layer, head)
    layers_of, heads_of = [l for l, _ in heads], [h for _, h in heads]
    queries = inputs.queries[layers_of, heads_of]                                   # (n, S, hd) float32
    keys = inputs.keys[layers_of, heads_of]                                         # (n, S, hd) float32
    return {"kind": "neuron", "id": view_id, "tokens": list(inputs.tokens), "num_layers": int(num_layers),
            "num_heads": int(num_heads), "head_size": int(head_size), "scale": 1.0 / math.sqrt(head_size),
            "layer": int(layer), "head": int(head), "query": None if query is None else int(query),
            "heads": [[int(l), int(h)] for l, h in heads], "queries": encode(queries, "float16"),
            "keys": encode(keys, "float16"), "window": WINDOW, "truncated": bool(inputs.truncated),
            "source": inputs.source, "summary": summary,
            "export": export_info(inputs.source, inputs.text, inputs.text_pair)}


def vectors(payload: dict[str, Any], layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    """(queries, keys) ``(S, hd)`` each of (``layer``, ``head``) as the browser reads them from a value (a
    ``KeyError`` when the value lacks that head)."""
    pairs = [(int(l), int(h)) for l, h in payload["heads"]]
    if (layer, head) not in pairs:
        raise KeyError(f"the value holds no vectors of layer index {layer}, head {head}")
    at = pairs.index((layer, head))
    return browser_arrays.decode(payload["queries"])[at], browser_arrays.decode(payload["keys"])[at]


TEMPLATE = ('<div class="neuron-view" data-kind="neuron"><div class="neuron-caption neuron-summary"></div>'
            '<div class="neuron-controls"></div><div class="neuron-scroll">'
            '<canvas class="neuron-canvas" role="img" tabindex="0"></canvas></div>'
            '<div class="neuron-tip" role="status"></div></div>')


def script() -> str:
    """``js_on_load``: the arrays' decoder, the neuron view's script (each defined once per page), its mount."""
    return view_script(SCRIPT, "window.BertNeuronView.mount(element, props, trigger, watch);")


def component(label: str) -> Any:
    """The neuron view's ``gr.HTML`` (a static template the script draws in), whose value is a dict."""
    return canvas_html(label, TEMPLATE, script(), "the neuron view's query and key vectors, float16",
                       ["neuron-canvas-view"])
