"""One canvas view in the page (docs/design/browser-views.md): a Gradio 6 ``gr.HTML`` with a static template that
its script draws in, whose value is a JSON dict of arrays (``explorer/views/browser_arrays.py``). The Attention views,
the neuron view and the Embeddings maps are built with these two functions; what each draws is its own script's.
"""
from __future__ import annotations

import functools
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from explorer.views import browser_arrays as browser_arrays

TOOLS = Path(__file__).resolve().parents[2] / "assets" / "canvas_tools.js"     # window.BertCanvas
SVG = Path(__file__).resolve().parents[2] / "assets" / "svg_context.js"        # window.BertSvg (the exports)
KINDS = frozenset({"maps", "head_view", "model_view", "neuron", "dimensions", "similarity"})   # the views' values

_last_asked = 0
_asked_lock = threading.Lock()


def asked_now() -> int:
    """A number that grows with every call in this process and across restarts (wall-clock nanoseconds, made
    strictly increasing): when the server began a request whose answer is a canvas value."""
    global _last_asked
    with _asked_lock:
        _last_asked = max(time.time_ns(), _last_asked + 1)
        return _last_asked


def stamp(answer: Any, asked: int) -> Any:
    """``answer`` (one output or a tuple of them) with ``asked`` written into every canvas value it holds
    (a dict whose ``kind`` is in ``KINDS``): the page drops an answer for another input that is older than the
    one it shows (docs/design/browser-views.md, *Late answers*). Anything else passes as it is."""
    for value in answer if isinstance(answer, (tuple, list)) else (answer,):
        if isinstance(value, dict) and value.get("kind") in KINDS and "id" in value:
            value["asked"] = asked
    return answer


def stamped(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose canvas values carry ``asked``, taken when the call began (not when it ended: a slow answer
    begun first stays the older one). :func:`explorer.endpoints.handler` applies it to every handler."""
    @functools.wraps(fn)
    def served(*args: Any, **kwargs: Any) -> Any:
        asked = asked_now()
        return stamp(fn(*args, **kwargs), asked)

    return served


def view_script(source: Path, mount: str) -> str:
    """``js_on_load``: the arrays' decoder, the SVG drawing context (``assets/svg_context.js``), the drawing tools
    (``assets/canvas_tools.js``) and the view's script (each defines itself once per page), then ``mount`` (a call
    such as ``window.BertNeuronView.mount(element, props, trigger, watch);``)."""
    shared = "\n".join(path.read_text(encoding="utf-8") for path in (SVG, TOOLS, source))
    return f"{browser_arrays.script()}\n{shared}\n{mount}"


def canvas_html(label: str, template: str, script: str, description: str, elem_classes: list[str],
                **options: Any) -> Any:
    """The view's ``gr.HTML``: labelled ``label``, static ``template``, ``script`` as ``js_on_load``, no value
    until an answer comes; the API describes its value as an object (``description``)."""
    import gradio as gr                                   # only here: the view modules import without Gradio

    class CanvasView(gr.HTML):
        def api_info(self) -> dict[str, Any]:
            return {"type": "object", "description": f"{description} (docs/design/browser-views.md)"}

    return CanvasView(value=None, label=label, show_label=True, html_template=template, js_on_load=script,
                      elem_classes=elem_classes, container=True, **options)


def event(view: Any, name: str) -> Any:
    """The listener of the custom event ``name`` that ``view``'s script fires (``trigger(name)``), bound to
    ``view`` as Gradio's own listeners are, so ``gr.on`` and ``endpoint`` take it in a list of triggers."""
    from gradio.events import EventListener

    return types.MethodType(EventListener(event_name=name).listener, view)
