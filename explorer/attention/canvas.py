"""The Attention tab's canvas views (heatmap, head view, model view): what Python sends the browser.

Python prepares, the browser draws (docs/design/browser-views.md). One ``/attention`` answer carries, for
one input, compact arrays (``explorer.views.browser_arrays``, uint8 with scale 1.0: within 1/510 of the engine's
weights; deflated, mostly-zero maps are 0.1-0.25 of their bytes) that ``assets/attention_view.js`` draws on
``<canvas>`` elements:

* the **heatmap** value holds the maps: every layer x every head when they fit ``ALL_LAYERS_BUDGET`` values,
  else the chosen layer's heads that fit ``LAYER_BUDGET`` (the chosen head first, then the head view's); plus
  every head's statistics (float16) and the colour table. A layer or head change the browser holds the maps
  for redraws there, with no request; else the view asks the server (the ``fetch`` event);
* the **head view** value names the heads to draw and refers to the heatmap's maps by ``id`` (None after a
  heads change: whatever maps the page holds);
* the **model view** value holds every layer x head pooled into blocks of tokens (``grid_block``) so the whole
  grid fits ``GRID_BUDGET`` values.

Pure functions (no Gradio) but for :func:`component`, which makes the ``gr.HTML`` that runs the script.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.probes.attention.maps import AttentionResult
from engine.probes.attention.head_stats import STAT_NAMES, STAT_TITLES
from explorer.attention.export import colors
from explorer.attention.plots import HEAD_COLORS, HEAD_VIEW_THRESHOLD, pool_map
from explorer.views.canvas_view import canvas_html, view_script
from explorer.views.browser_arrays import LEVELS, encode
from explorer.views.export_names import export_info

ALL_LAYERS_BUDGET = 1_200_000   # map values (bytes in uint8) sent at once when every layer fits
LAYER_BUDGET = 800_000          # else: the chosen layer's heads that fit this many values
GRID_BUDGET = 160_000           # the model view's pooled grid: at most this many values
GRID_MAX_TOKENS = 48            # and at most this many rows (blocks) per small map
HEAD_VIEW_WINDOW = 40           # the head view shows this many tokens at a time (a window the user scrolls)
CHANGE_BUDGET = 280_000         # JSON characters of one layer or head change that both the heatmap and the neuron
                                # view lack (the 300 KB, less Gradio's framing): joined_fetch
SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "attention_view.js"
KINDS = ("heatmap", "head_view", "model_view")


def palette() -> list[str]:
    """The 256 colours of the uint8 levels 0..255, as ``#rrggbb``: the exports' colour scale
    (``explorer.attention.export.colors``), so a drawn cell and an exported pixel are the same colour."""
    rgb = colors(np.arange(LEVELS + 1, dtype=float) / LEVELS)                     # (256, 3)
    return ["#{:02x}{:02x}{:02x}".format(*row) for row in rgb.tolist()]


def chosen_maps(num_layers: int, num_heads: int, seq_len: int, layer: int, head: int,
                view_heads: Sequence[int]) -> tuple[list[int], list[int]]:
    """(layers, heads) whose maps one answer sends: all of them when they fit ``ALL_LAYERS_BUDGET``, else the
    chosen ``layer`` with as many heads as fit ``LAYER_BUDGET`` (``head`` first, then ``view_heads``, then the
    rest), at least ``head``."""
    one = seq_len * seq_len
    if num_layers * num_heads * one <= ALL_LAYERS_BUDGET:
        return list(range(num_layers)), list(range(num_heads))
    order = list(dict.fromkeys([head, *view_heads, *range(num_heads)]))
    fit = max(1, LAYER_BUDGET // max(one, 1))
    return [layer], sorted(order[:fit])


def grid_block(num_layers: int, num_heads: int, seq_len: int) -> int:
    """Tokens per block in the model view: the smallest block that keeps the pooled grid within
    ``GRID_BUDGET`` values and ``GRID_MAX_TOKENS`` blocks a side."""
    side = min(GRID_MAX_TOKENS, int(np.sqrt(GRID_BUDGET / max(num_layers * num_heads, 1))))
    return max(1, -(-seq_len // max(side, 1)))


def heatmap_value(result: AttentionResult, layer: int, head: int, view_heads: Sequence[int],
                  view_id: str, only: Sequence[int] | None = None) -> dict[str, Any]:
    """The heatmap's value: tokens, the chosen maps (uint8 with scale 1.0; ``only``: ``layer``'s maps of those
    heads), every head's statistics (float16), the colour table and ``export`` (the model and the input the three
    views' exports are named after). ``layer`` is the engine's index (the views show it from 1)."""
    seq_len = len(result.tokens)
    layers, heads = chosen_maps(result.num_layers, result.num_heads, seq_len, layer, head, view_heads)
    if only is not None:
        layers, heads = [layer], sorted(int(h) for h in only)
    maps = result.attentions[layers][:, heads]                                  # (L', h', S, S) float32
    stats = np.stack([result.stats.get(name) for name in STAT_NAMES], axis=-1)  # (L, nh, 7)
    return {"kind": "maps", "id": view_id, "tokens": list(result.tokens), "segments": list(result.token_type_ids),
            "num_layers": result.num_layers, "num_heads": result.num_heads, "layer": int(layer), "head": int(head),
            "map_layers": layers, "map_heads": heads, "maps": encode(maps, "uint8", scale=1.0),
            "stats": encode(np.nan_to_num(stats), "float16"), "stat_names": list(STAT_NAMES),
            "stat_titles": [STAT_TITLES[name] for name in STAT_NAMES],
            "special_names": list(result.special_names()), "palette": palette(), "source": result.source,
            "export": export_info(result.source, result.text, result.text_pair)}


def heatmap_within(result: AttentionResult, layer: int, head: int, view_heads: Sequence[int], view_id: str,
                   room: int) -> dict[str, Any]:
    """:func:`heatmap_value`, with fewer maps while its JSON is over ``room`` characters: ``layer``'s alone, then
    fewer of its heads (the last of ``head``, ``view_heads``, the rest, dropped first), at least ``head``'s."""
    value = heatmap_value(result, layer, head, view_heads, view_id)
    order = [h for h in dict.fromkeys([head, *view_heads, *range(result.num_heads)]) if h in value["map_heads"]]
    count = len(order) if len(value["map_layers"]) > 1 else len(order) - 1
    while count >= 1 and len(json.dumps(value)) > room:
        value = heatmap_value(result, layer, head, view_heads, view_id, only=order[:count])
        count -= 1
    return value


def head_view_value(view_heads: Sequence[int], view_id: str | None) -> dict[str, Any]:
    """The head view's value: the heads to draw, their colours, and the maps' ``id`` (the heatmap's)."""
    return {"kind": "head_view", "id": view_id, "heads": [int(h) for h in view_heads],
            "colors": list(HEAD_COLORS), "threshold": HEAD_VIEW_THRESHOLD, "window": HEAD_VIEW_WINDOW}


def model_view_value(result: AttentionResult, view_id: str) -> dict[str, Any]:
    """The model view's value: every layer x head pooled into blocks (mean over query blocks, sum over key
    blocks: rows still sum to 1), uint8 with scale 1.0."""
    block = grid_block(result.num_layers, result.num_heads, len(result.tokens))
    grid = pool_map(result.attentions, block)                                   # (L, nh, S', S') float32
    return {"kind": "model_view", "id": view_id, "grid": encode(np.clip(grid, 0.0, 1.0), "uint8", scale=1.0),
            "block": block, "num_layers": result.num_layers, "num_heads": result.num_heads,
            "seq_len": len(result.tokens)}


def input_id(model: object, text: str, pair: str | None, length: int) -> str:
    """The views' ``id`` of one input on one model object (the forward cache's key): a ``fetch`` that names it
    gets only the new layer's maps, the page holding the rest."""
    return hashlib.sha1(repr((id(model), text, pair, length)).encode("utf-8")).hexdigest()[:12]


def values(result: AttentionResult, layer: int, head: int, view_heads: Sequence[int],
           view_id: str | None = None) -> tuple[dict[str, Any], ...]:
    """(heatmap, head view, model view) values for one answer, sharing ``view_id`` (a fresh one when None)."""
    view_id = view_id or uuid.uuid4().hex[:12]
    return (heatmap_value(result, layer, head, view_heads, view_id), head_view_value(view_heads, view_id),
            model_view_value(result, view_id))


def template(kind: str) -> str:
    """The static HTML the script fills (static: Gradio re-renders a changed template over the drawing); the note
    under the controls says why a head view looks empty."""
    return (f'<div class="attn-view attn-{kind.replace("_", "-")}" data-kind="{kind}">'
            '<div class="attn-caption"></div><div class="attn-controls"></div>'
            '<div class="attn-note" role="status"></div>'
            '<div class="attn-scroll"><canvas class="attn-canvas" role="img"></canvas></div>'
            '<div class="attn-tip" role="status"></div></div>')


def script(kind: str) -> str:
    """``js_on_load`` for one view: the shared script (defined once per page), then this view's mount."""
    if kind not in KINDS:
        raise ValueError(f"unknown view {kind!r}")
    return view_script(SCRIPT, f"window.BertAttentionViews.mount({kind!r}, element, props, trigger, watch);")


def component(kind: str, label: str) -> Any:
    """The ``gr.HTML`` of one view (``kind`` in ``KINDS``), labelled ``label``, whose value is a dict (the API says
    so); the heatmap's fires ``fetch`` when the browser lacks a layer's maps, ``neuron`` when the neuron view
    lacks the chosen head's vectors (``window.BertNeuronView.wants()``, assets/neuron_view.js) and ``both`` when
    both lack them for the input the page holds (``explorer.attention.joined_fetch``)."""
    return canvas_html(label, template(kind), script(kind), f"the {kind.replace('_', ' ')}'s arrays",
                       ["attention-canvas", f"attention-{kind.replace('_', '-')}"])
