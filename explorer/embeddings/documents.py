"""The Embeddings tab's two maps (hidden dimensions, position similarity) as one standalone HTML file
(``explorer.views.standalone``), from the values the tab sends (``canvas.dimensions_value``,
``canvas.similarity_value``) and the same script. A ``<select>`` offers the components the value holds and writes
the radio the script reads as the tab's (``#embeddings-component``); a line says which. Pure, no Gradio: the
*Download as HTML* button (``explorer.embeddings.download``) and ``explorer.notebook`` call it."""
from __future__ import annotations

from typing import Any

from engine.probes.representations.embeddings import COMPONENTS
from explorer.embeddings import canvas
from explorer.embeddings.plots import COMPONENT_LABELS
from explorer.views.standalone import Control, Panel, standalone_html

LABELS = {"dimensions": "Hidden dimensions (row = token, column = dimension)",
          "similarity": "Position similarity (cosine of the learned position embeddings)"}
NOT_SHOWN = "Show the embeddings in the tab first, then download them."


def _mount(kind: str) -> str:
    """The mount call that ends ``canvas.script(kind)`` (``js_on_load``)."""
    return f"window.BertEmbeddingsViews.mount({kind!r}, element, props, trigger, watch);"


def maps_document(dimensions: Any, similarity: Any, title: str, component: str | None = None) -> str:
    """The two maps of one answer as one HTML document; ``component`` (default the answer's) is where the
    select starts when the value holds it. A model without a position table (no similarity to draw) gets the
    dimensions map alone."""
    if not isinstance(dimensions, dict) or dimensions.get("kind") != "dimensions":
        raise ValueError(f"There are no hidden dimensions to save yet. {NOT_SHOWN}")
    held = [name for name in COMPONENTS if name in dimensions["maps"]]
    if not held:
        raise ValueError(f"The hidden-dimensions map holds no component. {NOT_SHOWN}")
    chosen = component if component in held else dimensions["component"] if dimensions["component"] in held \
        else held[0]
    every = len(held) == len(COMPONENTS)
    lines = [f"{len(dimensions['rows'])} tokens × {dimensions['columns']} dimensions.",
             "This file holds every component: " + ", ".join(held) + "." if every else
             f"This file holds the {', '.join(held)} component{'s' if len(held) > 1 else ''} only (at this length "
             "the app sends the chosen one)."]
    control = Control("embeddings-component", "Component", [(COMPONENT_LABELS[n], n) for n in held], chosen,
                      mirror="radio", name="embeddings-component")
    panels = [Panel(LABELS["dimensions"], canvas.template("dimensions"), dimensions, _mount("dimensions"))]
    if isinstance(similarity, dict) and similarity.get("kind") == "similarity" and similarity.get("columns"):
        panels.append(Panel(LABELS["similarity"], canvas.template("similarity"), similarity, _mount("similarity")))
    else:
        lines.append("No position similarity: this model has no table of learned positions.")
    return standalone_html(title, panels, [canvas.SCRIPT], [control], lines)
