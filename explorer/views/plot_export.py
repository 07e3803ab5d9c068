"""The Plotly charts' export control on the page (docs/design/export.md, *SVG and hi-res PNG*):
``assets/plot_export.js`` after ``assets/canvas_tools.js`` (its names and title: ``window.BertCanvas``), run once
when the page loads as a js-only load event, so every ``gr.Plot`` (also one drawn later) gets "SVG", "PNG 2x" and
"PNG 3x" buttons named after the model, the input and the view (``explorer/views/plot_names.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from explorer.views.canvas_view import TOOLS

PLOT_EXPORT = Path(__file__).resolve().parents[2] / "assets" / "plot_export.js"     # window.BertPlotExport


def script() -> str:
    """The load event's ``js``: a function that defines ``window.BertCanvas`` (once per page) and the charts'
    export control, and returns no outputs."""
    tools = TOOLS.read_text(encoding="utf-8")
    charts = PLOT_EXPORT.read_text(encoding="utf-8")
    return f"() => {{\n{tools}\n{charts}\nreturn [];\n}}"


def install(demo: Any) -> None:
    """Run :func:`script` in every page of ``demo`` (a ``gr.Blocks``, inside its ``with``) when it loads; no
    request reaches the server."""
    demo.load(None, js=script(), api_visibility="private")
