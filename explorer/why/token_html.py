"""The Why tab's main view: the input's tokens, each filled by its signed attribution, as escaped HTML.

A pure function of plain data (no Gradio): every token and attribute goes through
``html.escape(quote=True)``. Red fills push the explained score up, blue fills push it down; the
fill's strength is the token's share of the largest attribution by size (at most ``MAX_ALPHA``
opaque, so the text reads on light and dark pages: it keeps the page's colour). The value sits
under each token; the token the head reads (a ``[MASK]``, the answer's start) is outlined. Styles
are the ``.why-tokens`` rules in ``assets/style.css``.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

from explorer.why.numbers import shown

UP_RGB = (220, 38, 38)       # red, as explorer.why.plots.UP
DOWN_RGB = (37, 99, 235)     # blue, as explorer.why.plots.DOWN
MAX_ALPHA = 0.7


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def fill(value: float, largest: float) -> str:
    """The CSS background of one token: red or blue at an opacity of ``|value| / largest`` x ``MAX_ALPHA``."""
    if largest <= 0 or value == 0:
        return "transparent"
    r, g, b = UP_RGB if value > 0 else DOWN_RGB
    return f"rgba({r}, {g}, {b}, {min(1.0, abs(value) / largest) * MAX_ALPHA:.3f})"


def attribution_html(tokens: Sequence[str], values: Sequence[float], target_position: int | None = None,
                     percent_points: bool = False) -> str:
    """The tokens in order, each filled by its attribution with the value under it and a hover title
    (position, token, value); ``target_position`` outlined; a one-line legend above. Values are plain decimals
    (attributions to a logit) or, with ``percent_points``, signed percentages (to a probability): no exponent."""
    if len(tokens) != len(values):
        raise ValueError(f"{len(tokens)} tokens but {len(values)} attributions")
    largest = max((abs(v) for v in values), default=0.0)
    cells = []
    for i, (token, value) in enumerate(zip(tokens, values)):
        target = " wt-target" if i == target_position else ""
        value_text = shown(value, percent_points)
        title = _escape(f"position {i} · {token} · {value_text}" + (" · the token the head reads" if target else ""))
        cells.append(f'<span class="wt{target}" style="background: {fill(value, largest)}" title="{title}">'
                     f'<span class="wt-tok">{_escape(token)}</span><span class="wt-v">{_escape(value_text)}</span>'
                     f"</span>")
    legend = ('<div class="wt-legend"><span class="wt-up">red</span>: pushed the score up · '
              '<span class="wt-down">blue</span>: pushed it down · the stronger the colour, the larger the push'
              + (" · outlined: the token the head reads" if target_position is not None else "") + "</div>")
    return f'<div class="why-tokens">{legend}<div class="wt-body">{"".join(cells)}</div></div>'
