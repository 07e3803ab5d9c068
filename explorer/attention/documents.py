"""The Attention tab's canvas views as standalone HTML files (``explorer.views.standalone``): the heatmap, head
view and model view together, or the neuron view alone, from the values the tab sends (``canvas.values``,
``neuron_canvas.value``) and the same scripts. The file offers the layers and heads its value holds (a ``<select>``
each, writing the boxes the scripts read as the tab's sliders, ``#attention-layer`` and ``#attention-head``), and
says which in a line of text. Pure functions, no Gradio: the *Download as HTML* buttons
(``explorer.attention.download``) and ``explorer.notebook`` call them."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from explorer.attention import canvas, neuron_canvas
from explorer.views.standalone import Control, Panel, standalone_html

LABELS = {"heatmap": "Heatmap of the chosen head (row = query, column = key)",
          "head_view": "Head view (one colour per head; the chosen head drawn strongest)",
          "model_view": "Model view: every layer (rows) × head (columns); click a tile to pick it"}
NEURON_LABEL = "Neuron view: query, keys, their element-wise products, the scores and their softmax"
NOT_SHOWN = "Show the view in the tab first, then download it."
NAMES = {"maps": "heatmap", "head_view": "head view", "model_view": "model view", "neuron": "neuron view"}


def numbers(values: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1–3, 5``: runs of consecutive numbers joined by a dash."""
    runs: list[list[int]] = []
    for v in sorted(set(int(x) for x in values)):
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def layer_head_controls(layers: Sequence[int], heads: Sequence[int], layer: int, head: int) -> list[Control]:
    """The *Layer* (shown from 1) and *Head* selects over ``layers`` and ``heads`` (engine indices), starting at
    ``layer`` and ``head`` when offered, else at the first offered."""
    layer = layer if layer in layers else layers[0]
    head = head if head in heads else heads[0]
    return [Control("attention-layer", "Layer", [(str(l + 1), str(l + 1)) for l in layers], str(layer + 1)),
            Control("attention-head", "Head", [(str(h), str(h)) for h in heads], str(head))]


def _checked(value: Any, kind: str) -> dict[str, Any]:
    """``value`` when it is a canvas value of ``kind``; else a ``ValueError`` saying to show the view first."""
    if not isinstance(value, dict) or value.get("kind") != kind:
        raise ValueError(f"There is no {NAMES[kind]} to save yet. {NOT_SHOWN}")
    return value


def views_document(heatmap: Any, head_view: Any, model_view: Any, title: str, layer: int | None = None,
                   head: int | None = None) -> str:
    """The heatmap, head view and model view of one answer as one HTML document; ``layer`` and ``head``
    (engine indices; default the answer's) are where its selects start when the value holds them."""
    maps, heads_value, grid = _checked(heatmap, "maps"), _checked(head_view, "head_view"), _checked(model_view,
                                                                                                   "model_view")
    if grid["id"] != maps["id"] or heads_value["id"] not in (None, maps["id"]):
        raise ValueError("The views show different inputs (one is still loading): press Show attention again, "
                         "then download.")
    layers, heads = [int(l) for l in maps["map_layers"]], [int(h) for h in maps["map_heads"]]
    every = len(layers) == maps["num_layers"] and len(heads) == maps["num_heads"]
    held = (f"This file holds every head's map of this input: layers {numbers(l + 1 for l in layers)}, heads "
            f"{numbers(heads)}." if every else
            f"This file holds the maps of layer {numbers(l + 1 for l in layers)}, heads {numbers(heads)} only (at "
            "this length the app sends one layer at a time); the model view shows every layer, pooled.")
    lines = [f"Model: {maps.get('source', '?')} · {len(maps['tokens'])} tokens · layers from 1, heads from 0.",
             held]
    controls = layer_head_controls(layers, heads, maps["layer"] if layer is None else layer,
                                   maps["head"] if head is None else head)
    panels = [Panel(LABELS[kind], canvas.template(kind), value, _mount(kind))
              for kind, value in zip(canvas.KINDS, (maps, heads_value, grid))]
    return standalone_html(title, panels, [canvas.SCRIPT], controls, lines)


def neuron_document(value: Any, title: str, layer: int | None = None, head: int | None = None) -> str:
    """The neuron view of one answer as one HTML document: the layers and heads whose vectors it holds are
    offered (every head of a short input, else the chosen one); a click on a token picks the query."""
    value = _checked(value, "neuron")
    pairs = [(int(l), int(h)) for l, h in value["heads"]]
    layers, heads = sorted({l for l, _ in pairs}), sorted({h for _, h in pairs})
    every = len(pairs) == value["num_layers"] * value["num_heads"]
    held = ("This file holds every head's query and key vectors: layers "
            f"{numbers(l + 1 for l in layers)}, heads {numbers(heads)}." if every else
            f"This file holds the vectors of layer {numbers(l + 1 for l in layers)}, head {numbers(heads)} only (at "
            "this length the app sends one head at a time).")
    lines = [f"Model: {value.get('source', '?')} · {len(value['tokens'])} tokens · head size {value['head_size']}. "
             "Click a token (or use the arrow keys on the drawing) to make it the query.", held]
    controls = layer_head_controls(layers, heads, value["layer"] if layer is None else layer,
                                   value["head"] if head is None else head)
    query = value.get("query") or 0
    tokens = [(f"{i}: {t}", str(i)) for i, t in enumerate(value["tokens"])]
    controls.append(Control("neuron-query", "Query token", tokens, str(query if 0 <= query < len(tokens) else 0)))
    panel = Panel(NEURON_LABEL, neuron_canvas.TEMPLATE, value, NEURON_MOUNT)
    return standalone_html(title, [panel], [neuron_canvas.SCRIPT], controls, lines)


# The value's query is drawn as the answer to a *Show the neuron view* click (assets/neuron_view.js, "Late answers"):
# the file clicks a hidden #neuron-show before the view reads its value, as the page would have.
NEURON_MOUNT = ("const ask = Object.assign(document.createElement('button'), { type: 'button', id: 'neuron-show', "
                "hidden: true }); element.append(ask); ask.click(); "
                "window.BertNeuronView.mount(element, props, trigger, watch);")


def _mount(kind: str) -> str:
    """The mount call that ends ``canvas.script(kind)`` (``js_on_load``)."""
    return f"window.BertAttentionViews.mount({kind!r}, element, props, trigger, watch);"
