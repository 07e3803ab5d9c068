"""The Attention tab's *Download as HTML* buttons: the heatmap, head view and model view of the answer the page
shows, or its neuron view, as one standalone file (``explorer.attention.documents``) that draws offline in any
browser. The views' values are the event's inputs (what the page holds; no model runs); the layer and head
sliders say where the file's selects start."""
from __future__ import annotations

from typing import Any

import gradio as gr

from explorer.attention import documents
from explorer.endpoints import endpoint
from explorer.models.picker import ModelPicker
from explorer.views import html_download


def section() -> dict[str, Any]:
    """The two buttons and the file they fill, inside the current layout."""
    with gr.Row():
        views = gr.Button("Download the views as HTML", size="sm", elem_id="attention-html")
        neuron = gr.Button("Download the neuron view as HTML", size="sm", elem_id="neuron-html")
    file = gr.File(label="Standalone HTML (opens offline in any browser)", interactive=False)
    return {"html_views": views, "html_neuron": neuron, "html_file": file}


def _where(layer: Any, head: Any) -> tuple[int | None, int | None]:
    """The sliders' layer (shown from 1) and head as engine indices; None for what is not a number."""
    try:
        return int(layer) - 1, int(head)
    except (TypeError, ValueError, OverflowError):
        return None, None


def views_file(layer: Any, head: Any, heatmap: Any, head_view: Any, model_view: Any, title: str) -> str:
    """The three views' document, its selects at the sliders' layer and head."""
    return documents.views_document(heatmap, head_view, model_view, title, *_where(layer, head))


def neuron_file(layer: Any, head: Any, view: Any, title: str) -> str:
    """The neuron view's document, its selects at the sliders' layer and head."""
    return documents.neuron_document(view, title, *_where(layer, head))


def wire(picker: ModelPicker, w: dict[str, Any]) -> None:
    """Declare the buttons' events (private: a Python caller uses ``explorer.notebook`` or the documents)."""
    settings = [picker.dropdown, w["text"], w["pair"], w["layer"], w["head"]]
    options: dict[str, Any] = dict(gpu=False, clear=False, api_visibility="private", show_progress="minimal")
    endpoint(w["html_views"].click, html_download.handler("attention", "press Show attention", views_file, 3),
             [*settings, w["heatmap"], w["head_view"], w["model_view"]], [w["html_file"]], api_name="attention_html",
             **options)
    endpoint(w["html_neuron"].click, html_download.handler("neuron-view", "press Show the neuron view", neuron_file,
                                                           1),
             [*settings, w["neuron"]["view"]], [w["html_file"]], api_name="neuron_view_html", **options)
