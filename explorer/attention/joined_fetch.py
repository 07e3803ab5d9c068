"""One request for a layer or head change that both the heatmap and the neuron view lack (docs/design/browser-views.md,
*A layer or head change*). ``assets/attention_view.js`` fires the heatmap's ``both`` event when the neuron view is
shown and the page holds one input for both views. Asked apart, the two answers came to ~360 KB at 512 tokens on a
bert-large (three maps and one head's vectors); joined, they keep within ``canvas.CHANGE_BUDGET``: that head's
vectors and as many of that layer's maps as fit beside them, the chosen head's at least."""
from __future__ import annotations

import json
from typing import Any

import gradio as gr

from explorer.attention import canvas, neuron_tab
from explorer.attention.actions import cached_attention, effective_length, model_shape, read_inputs, view_heads
from explorer.endpoints import endpoint
from explorer.layer_numbers import head_index
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.views import canvas_view

API_NAME = "attention_fetch_both"


def fetch_both(services: Services, model_key: str | None, text: str | None, text_pair: str | None, layer: Any,
               head: Any, max_length: Any, heads: Any, held: str | None) -> tuple[Any, Any]:
    """(the heatmap's value, the neuron view's value) for the chosen layer and head when ``held`` (the ``id`` the
    page holds) is this input's: the head's vectors alone and the layer's maps that fit ``canvas.CHANGE_BUDGET``
    with them. For another input (the text was edited since) the neuron view's whole value and no heatmap value:
    the page then asks for that input's maps (``fetch``)."""
    if not text or not str(text).strip():
        return gr.skip(), gr.skip()
    neuron = neuron_tab.fetch_neuron_canvas(services, model_key, text, text_pair, layer, head, max_length, held)
    if neuron["id"] != held:
        return gr.skip(), neuron
    text, pair = read_inputs(text, text_pair)
    with services.probing():
        loaded = services.model(model_key)
        index, head = head_index(*model_shape(loaded), layer, head)
        chosen = view_heads(heads, model_shape(loaded)[1])
        result = cached_attention(services, loaded, text, pair, effective_length(services, loaded, max_length))
    room = canvas.CHANGE_BUDGET - len(json.dumps(neuron))
    return canvas.heatmap_within(result, index, head, chosen, held, room), neuron


def wire(services: Services, picker: ModelPicker, fields: dict[str, Any], heatmap: Any, heads_box: Any,
         neuron_view: Any) -> Any:
    """Wire the heatmap's ``both`` event (private ``attention_fetch_both``) to :func:`fetch_both`, answered from the
    forward cache into the heatmap and the neuron view; ``fields`` are the tab's inputs (``sections.inputs``)."""
    def fetch(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
              heads: list[int], evt: gr.EventData) -> tuple[Any, Any]:
        held = (getattr(evt, "_data", None) or {}).get("id")
        return fetch_both(services, model_key, text, text_pair, layer, head, max_length, heads, held)

    inputs = [picker.dropdown, *(fields[name] for name in ("text", "pair", "layer", "head", "length")), heads_box]
    return endpoint(canvas_view.event(heatmap, "both"), fetch, inputs, [heatmap, neuron_view], api_name=API_NAME,
                    api_visibility="private", trigger_mode="always_last", show_progress="minimal")
