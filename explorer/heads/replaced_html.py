"""The Replaced tokens view: every token of the input as a coloured chip, P(replaced) under it, as escaped HTML.

A pure function of plain data (no Gradio): each token's text and every attribute go through
``html.escape(quote=True)``, so a special token such as ``<s>`` shows as it is. The styles are inline (no page
rule needed): the fill is one red, more opaque the higher P(replaced) (translucent, so the theme's text stays
readable on a light or a dark page); a text token over the threshold gets a solid outline and the caption
``replaced``; a special token (named by its role: "cls", "sep", ...) is dashed and faded, never called replaced.
"""
from __future__ import annotations

import html
import math
from collections.abc import Sequence

from explorer.formatting import percent

RED = (214, 39, 40)                 # Plotly's D3 red: the fill of a token the discriminator suspects
MIN_ALPHA, MAX_ALPHA = 0.04, 0.75   # the fill's opacity at P(replaced) 0 and 1
OUTLINE = "#d62728"                 # the outline of a token over the threshold

STRIP_STYLE = "display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start;line-height:1.3"
CHIP_STYLE = ("display:inline-flex;flex-direction:column;align-items:center;padding:2px 6px;border-radius:5px;"
              "min-width:2.2em")
TOKEN_STYLE = "font-family:var(--font-mono, monospace);white-space:pre"
CAPTION_STYLE = "font-size:0.75em;opacity:0.85"
LEGEND_STYLE = "font-size:0.85em;opacity:0.85;margin-bottom:6px"


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def fill(probability: float) -> str:
    """The CSS fill for ``probability``: the red, its opacity rising from ``MIN_ALPHA`` (0) to ``MAX_ALPHA`` (1);
    a value that is no finite probability is clipped (NaN: the lowest)."""
    p = min(max(probability, 0.0), 1.0) if math.isfinite(probability) else 0.0
    r, g, b = RED
    return f"rgba({r}, {g}, {b}, {MIN_ALPHA + (MAX_ALPHA - MIN_ALPHA) * p:.3f})"


def chip_html(token: str, probability: float, role: str | None, over: bool) -> str:
    """One token's chip: its text, ``P(replaced)`` under it (and ``replaced`` when ``over``); its role in the
    hover title for a special token."""
    title = f"P(replaced) = {percent(probability)}"
    if role is not None:
        title += f" · special token ({role}): never counted"
        border = "2px dashed rgba(128, 128, 128, 0.6)"
    else:
        border = f"2px solid {OUTLINE}" if over else "2px solid transparent"
    style = f"{CHIP_STYLE};background:{fill(probability)};border:{border}" + (";opacity:0.6" if role else "")
    caption = percent(probability) + (" · replaced" if over else "")
    kind = "rt-special" if role is not None else ("rt-replaced" if over else "rt-token")
    return (f'<span class="rt {kind}" style="{style}" title="{_escape(title)}">'
            f'<span class="rt-text" style="{TOKEN_STYLE}">{_escape(token)}</span>'
            f'<span class="rt-p" style="{CAPTION_STYLE}">{_escape(caption)}</span></span>')


def replaced_html(tokens: Sequence[str], probabilities: Sequence[float], roles: Sequence[str | None],
                  threshold: float) -> str:
    """The strip: one chip per token in order (specials included, by ``roles``), those of the text with
    P(replaced) above ``threshold`` outlined and captioned ``replaced``, under a one-line legend."""
    if not len(tokens) == len(probabilities) == len(roles):
        raise ValueError(f"{len(tokens)} tokens, {len(probabilities)} probabilities and {len(roles)} roles")
    chips = [chip_html(token, p, role, role is None and p > threshold)
             for token, p, role in zip(tokens, probabilities, roles)]
    legend = (f"Fill: P(replaced), from clear (0%) to deep red (100%) · outlined: over the threshold "
              f"{percent(threshold)} · dashed: special tokens (not counted)")
    return (f'<div class="replaced-tokens"><div class="rt-legend" style="{LEGEND_STYLE}">{_escape(legend)}</div>'
            f'<div class="rt-strip" style="{STRIP_STYLE}">{"".join(chips)}</div></div>')
