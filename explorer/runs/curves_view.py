"""The live curves' widget, shared by the Training and Fine-tune tabs: a ``gr.HTML`` whose script
(``assets/curves_view.js``) draws the charts on canvases and appends the points each tick brings
(``explorer.runs.curves``), and the wiring that slows a tab's tick while its curves are not seen."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from explorer.endpoints import endpoint
from explorer.views.canvas_view import canvas_html, event, view_script

CURVES_SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "curves_view.js"
CURVES_TEMPLATE = ('<div class="curves-view" data-kind="curves"><div class="curves-grid"></div>'
                   '<div class="curves-tip"></div></div>')
HIDDEN_TICK_SECONDS = 10.0  # a tab's tick while its page is in the background or another tab is shown


def curves_view(label: str, elem_class: str) -> Any:
    """The live curves: canvas charts the page draws and appends to; ``elem_class`` names this tab's copy."""
    script = view_script(CURVES_SCRIPT, "window.BertCurves.mount(element, props, trigger, watch);")
    return canvas_html(label, CURVES_TEMPLATE, script, "the run's curves as points: a reset, then only new points",
                       [elem_class])


def slow_while_unseen(curves: Any, timer: Any, tick_seconds: float, api_prefix: str) -> None:
    """While ``curves`` are not seen (another tab, the page in the background; its script says so), ``timer``
    ticks every ``HIDDEN_TICK_SECONDS``; seen again, every ``tick_seconds``."""
    quiet: dict[str, Any] = dict(gpu=False, clear=False, show_progress="hidden", concurrency_limit=None,
                                 api_visibility="private", queue=False)
    endpoint(event(curves, "hidden"), lambda: gr.Timer(value=HIDDEN_TICK_SECONDS), None, timer,
             api_name=f"{api_prefix}_hidden", **quiet)
    endpoint(event(curves, "shown"), lambda: gr.Timer(value=tick_seconds), None, timer,
             api_name=f"{api_prefix}_shown", **quiet)
