"""What a Plotly chart's exports are named after (docs/design/export.md, *SVG and hi-res PNG*): the figure carries
``layout.meta = {"export": <export_info>, "view": <the chart's name>}``, which Gradio sends with the figure and
``assets/plot_export.js`` reads, so the files are ``bert-explorer_<model>_<first words>_<view>.svg|png`` and the
SVG's title names the model, the input and the view. The plot builders stay pure: the tabs' handlers stamp the
figures they return (:func:`named`).
"""
from __future__ import annotations

import re
from typing import Any

from explorer.views.export_names import export_info

VIEW_CHARS = 80         # a view's name as a figure carries it, at most
_TAGS = re.compile(r"<[^>]*>")


def figure_title(fig: Any) -> str:
    """The text of ``fig``'s title, its tags (``<br>``, ``<b>``) as spaces; "" when it has none."""
    title = getattr(getattr(fig, "layout", None), "title", None)
    text = getattr(title, "text", None) or ""
    return " ".join(_TAGS.sub(" ", str(text)).split())


def named(fig: Any, export: dict[str, str] | None, view: str | None = None) -> Any:
    """``fig`` (a plotly ``Figure``; None or anything else, such as ``gr.skip()``, passes as it is) with
    ``layout.meta`` holding ``export`` (``export_names.export_info``; None: the app's name only) and ``view`` (None
    or empty: the figure's title; cut to ``VIEW_CHARS``). Any other keys of a dict ``meta`` stay. Returns ``fig``."""
    layout = getattr(fig, "layout", None)
    if layout is None or not hasattr(fig, "update_layout"):
        return fig
    old = layout.meta
    meta = dict(old) if isinstance(old, dict) else {}
    said = " ".join(str(view or "").split()) or figure_title(fig)
    if said:
        meta["view"] = said[:VIEW_CHARS]
    else:
        meta.pop("view", None)
    if export:
        meta["export"] = {key: str(export[key]) for key in ("model", "input", "stem") if key in export}
    else:
        meta.pop("export", None)
    fig.update_layout(meta=meta)
    return fig


def named_for(fig: Any, model: str | None, text: str | None, view: str | None,
              pair: str | None = None) -> Any:
    """:func:`named` with the export info of ``model`` (the picker's source) and the input ``text`` (and ``pair``);
    a missing model or an empty text names the view only."""
    info = export_info(model, text, pair) if model and text and text.strip() else None
    return named(fig, info, view)
