"""Embed mode, for slides and iframes: ``?embed=1`` (or ``?view=<tab>``) with a link's other keys shows the one
view the link opens without the page's chrome.

``assets/page.js`` puts the class :data:`EMBED_CLASS` on ``<body>`` when the page address asks for it; the rules
in :data:`LINK_CSS` (appended to the page's CSS by ``explorer.page``, with the *Copy link* row's look) then
hide:

* the header (title, description, the glossary note) and Gradio's footer;
* the model picker's row and the description of the model (the link has picked the model);
* the tab bar of the page (the link has selected the tab; a tab's inner tab bar, as in Heads, stays);
* each tab's introduction and the *Copy link* row;
* the examples under a tab's inputs and the extra sections in accordions (ablation, export, over training, the
  neuron view, the JSON): :func:`mark_extras` gives them the class :data:`HIDDEN_CLASS`. The tab's own inputs
  (to change the text, layer or head during a talk) and its views remain.

The page still runs as a whole (every event works); only what is drawn changes. Remove ``embed=1`` from the
address to get the whole page back.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

EMBED_CLASS = "embed-mode"
HIDDEN_CLASS = "embed-hidden"      # what embed mode hides besides the page's own chrome (:func:`mark_extras`)

LINK_CSS = f"""
/* Embed mode (explorer/serving/links/embed.py): ?embed=1 shows the view alone. */
body.{EMBED_CLASS} #app-header,
body.{EMBED_CLASS} #model-picker,
body.{EMBED_CLASS} .model-info,
body.{EMBED_CLASS} #main-tabs > .tab-wrapper,
body.{EMBED_CLASS} .tab-intro,
body.{EMBED_CLASS} .copy-link-row,
body.{EMBED_CLASS} .{HIDDEN_CLASS},
body.{EMBED_CLASS} footer {{
  display: none !important;
}}
body.{EMBED_CLASS} .gradio-container {{
  padding-top: 0 !important;
}}
/* The Copy link row: a small button at the right of each tab, the box beside it once a link was copied. */
.copy-link-row {{
  justify-content: flex-end;
  align-items: end;
}}
.copy-link[data-note]::after {{
  content: " · " attr(data-note);
  font-weight: normal;
}}
"""


def mark_extras(demo: gr.Blocks) -> None:
    """Give every examples table and accordion of ``demo`` the class ``HIDDEN_CLASS`` (embed mode hides them)."""
    for block in demo.blocks.values():
        if isinstance(block, (gr.Dataset, gr.Accordion)):
            classes = block.elem_classes
            classes = [classes] if isinstance(classes, str) else list(classes or [])
            if HIDDEN_CLASS not in classes:
                block.elem_classes = [*classes, HIDDEN_CLASS]
