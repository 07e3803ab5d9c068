"""The Tag words view: the text with each tagged word (or entity) coloured by its tag, as escaped HTML.

A pure function of plain data (no Gradio): every piece of text and every attribute goes through
``html.escape(quote=True)``. The styles are the ``.tagged-words`` rules in ``assets/style.css``:
one translucent fill per tag type (``tw-c0`` … ``tw-c9``, cycled), which reads on light and dark
pages; the tag and its probability sit under the word. Untagged text (and ``O``) stays plain.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

from explorer.formatting import percent

COLORS = 10                 # tw-c0 .. tw-c9 in assets/style.css
PLAIN = ("O",)              # tags drawn as plain text


def tag_type(label: str) -> str:
    """The colour key of a tag: its type after the first ``-`` (``B-PER`` → ``PER``; ``NOUN`` → ``NOUN``)."""
    return label.split("-", 1)[-1]


def color_classes(labels: Sequence[str]) -> dict[str, int]:
    """Tag type -> colour number, in the order the model's labels first name each type (``O`` has none),
    so a type keeps its colour from one input to the next."""
    types = [tag_type(label) for label in labels]
    return {kind: i % COLORS for i, kind in enumerate(k for k in dict.fromkeys(types) if k not in PLAIN)}


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def tagged_html(text: str, spans: Sequence[tuple[int, int, str, float]], colors: dict[str, int]) -> str:
    """``text`` with each ``(start, end, label, score)`` span marked: its characters coloured by the label's
    type, ``label probability`` under them (and in the hover title); the rest as plain text."""
    parts: list[str] = []
    at = 0
    for start, end, label, score in sorted(spans):
        if start < at:                              # overlapping spans do not happen; never repeat text
            continue
        parts.append(_escape(text[at:start]))
        shown = _escape(text[start:end])
        if tag_type(label) in PLAIN or label in PLAIN:
            parts.append(f'<span class="tw-plain" title="{_escape(label)} {percent(score)}">{shown}</span>')
        else:
            caption = _escape(f"{label} {percent(score)}")
            number = colors.get(tag_type(label), 0)
            parts.append(f'<mark class="tw tw-c{number}" title="{caption}"><span class="tw-text">{shown}</span>'
                         f'<span class="tw-tag">{caption}</span></mark>')
        at = end
    parts.append(_escape(text[at:]))
    legend = "".join(f'<mark class="tw tw-c{n}"><span class="tw-tag">{_escape(kind)}</span></mark>'
                     for kind, n in colors.items())
    return (f'<div class="tagged-words"><div class="tw-legend">{legend}</div>'
            f'<div class="tw-body">{"".join(parts)}</div></div>')
