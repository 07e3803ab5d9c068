"""The Embeddings tab's *Download as HTML* button: the two maps (hidden dimensions, position similarity) of the
answer the page shows as one standalone file (``explorer.embeddings.documents``) that draws offline in any
browser. The maps' values are the event's inputs (what the page holds; no model runs); the *Component* radio says
where the file's select starts."""
from __future__ import annotations

from typing import Any

import gradio as gr

from explorer.embeddings import documents
from explorer.endpoints import endpoint
from explorer.models.picker import ModelPicker
from explorer.views import html_download


def section() -> dict[str, Any]:
    """The button and the file it fills, inside the current layout."""
    button = gr.Button("Download the maps as HTML", size="sm", elem_id="embeddings-html")
    file = gr.File(label="Standalone HTML (opens offline in any browser)", interactive=False)
    return {"html_button": button, "html_file": file}


def maps_file(component: Any, dimensions: Any, similarity: Any, title: str) -> str:
    """The two maps' document, its select at the radio's component."""
    return documents.maps_document(dimensions, similarity, title, component if isinstance(component, str) else None)


def wire(picker: ModelPicker, w: dict[str, Any]) -> None:
    """Declare the button's event (private: a Python caller uses ``explorer.notebook`` or the document)."""
    endpoint(w["html_button"].click, html_download.handler("embeddings", "press Show embeddings", maps_file, 2),
             [picker.dropdown, w["text"], w["pair"], w["component"], w["heatmap"], w["position_similarity"]],
             [w["html_file"]], api_name="embeddings_html", gpu=False, clear=False, api_visibility="private",
             show_progress="minimal")
