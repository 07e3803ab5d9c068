"""The one place where the Attention and Compare tabs turn the layer numbers a learner sees into the engine's
indices, and back.

One rule numbers layers in every tab (:data:`explorer.glossary.LAYER_RULE`): layer 0 is the embeddings' output,
and layer k (1 to L) is the output of the k-th encoder layer, made by that layer's attention heads. The engine
indexes its L attention layers from 0, so attention layer k in the UI (and in the API) is the engine's index
k - 1. Heads are numbered from 0 on both sides. Pure functions: no Gradio, no tensors.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from engine.checks import is_whole_number

FIRST_LAYER = 1               # the first layer that has attention heads; 0 is the embeddings' output
LAYER_LABEL = "Layer (from 1)"         # the layer fields of the Attention and Compare tabs
HEAD_LABEL = "Head (from 0)"
_SPLIT = re.compile(r"[,;\s]+")
_ITEM = re.compile(r"^([0-9]+):([0-9]+|\*)$")


def shown_layer(index: int) -> int:
    """The layer number a learner sees for the engine's attention-layer ``index``: 0 -> 1, L-1 -> L."""
    return int(index) + FIRST_LAYER


def shown_layers(count: int) -> list[int]:
    """The numbers of ``count`` attention layers as the UI shows them: 1 to ``count``."""
    return [shown_layer(i) for i in range(count)]


def layer_index(layer: Any, num_layers: int) -> int:
    """The engine's index of the attention layer a learner numbered ``layer`` (1 to ``num_layers``); a
    ``ValueError`` in the UI's numbering otherwise ("layer 0 is the embeddings' output…", "layer 7 does not
    exist: …, numbered 1 to 6")."""
    if not is_whole_number(layer):
        raise ValueError(f"layer must be a whole number from 1 to {num_layers}, got {layer!r}")
    number = int(layer)
    if number == 0:
        raise ValueError(f"layer 0 is the embeddings' output, before any attention: the layers with attention "
                         f"heads are numbered 1 to {num_layers}")
    if not FIRST_LAYER <= number <= num_layers:
        raise ValueError(f"layer {number} does not exist: this model has {num_layers} layers, numbered 1 to "
                         f"{num_layers} (layer 0 is the embeddings' output)")
    return number - FIRST_LAYER


def head_index(num_layers: int, num_heads: int, layer: Any, head: Any) -> tuple[int, int]:
    """(the engine's layer index, head) for the UI's ``layer`` (from 1) and ``head`` (from 0), or a
    ``ValueError`` naming the valid range in the UI's numbering."""
    index = layer_index(layer, num_layers)
    if not is_whole_number(head):
        raise ValueError(f"head must be a whole number from 0 to {num_heads - 1}, got {head!r}")
    if not 0 <= int(head) < num_heads:
        raise ValueError(f"head {int(head)} does not exist: each layer has {num_heads} heads, numbered 0 to "
                         f"{num_heads - 1}")
    return index, int(head)


def parse_heads(text: str, num_layers: int, num_heads: int) -> list[tuple[int, int]]:
    """``"1:0, 2:3, 4:*"`` (layers from 1, heads from 0, ``*`` = every head of the layer) -> the engine's
    (layer index, head) pairs in order, without repeats; a ``ValueError`` names a bad item."""
    found: dict[tuple[int, int], None] = {}
    for item in (p for p in _SPLIT.split(text or "") if p):
        match = _ITEM.match(item)
        if match is None:
            raise ValueError(f"{item!r} is not layer:head; write heads like 1:0, 2:3 (layers from 1, heads from "
                             "0), or 4:* for a whole layer")
        heads = range(num_heads) if match.group(2) == "*" else [int(match.group(2))]
        for head in heads:
            found[head_index(num_layers, num_heads, int(match.group(1)), head)] = None
    return list(found)


def heads_text(pairs: Iterable[tuple[int, int]]) -> str:
    """The engine's (layer index, head) pairs as the UI writes them: ``[(0, 1), (1, 0)]`` -> ``"1:1, 2:0"``."""
    return ", ".join(f"{shown_layer(layer)}:{head}" for layer, head in pairs)
