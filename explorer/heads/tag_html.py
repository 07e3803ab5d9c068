"""The Tag words view: the text with each tagged word (or entity) coloured by its tag, as escaped HTML.

A pure function of plain data (no Gradio): every piece of text and every attribute goes through
``html.escape(quote=True)``. Each tag type has its own colour (:data:`PALETTE`, from Plotly's *Alphabet*
palette, 26 colours made to be told apart): a translucent fill (``style="background: rgba(…)"``) that reads
on light and dark pages, the text keeping the theme's colour. The layout is the ``.tagged-words`` rules in
``assets/style.css``: the tag and its probability sit under the word, and the legend spells out each
part-of-speech (UPOS) tag, e.g. ``ADP adposition`` (its full name in the hover title, as on every word).
Untagged text (and ``O``) stays plain.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

from plotly.colors import hex_to_rgb, qualitative

from explorer.formatting import percent
from explorer.glossary import upos_meaning, upos_short

PLAIN = ("O",)              # tags drawn as plain text
FILL_ALPHA = 0.3            # the fill's opacity: the theme's text stays readable on it, light or dark


def _shows_on_light_and_dark(color: str) -> bool:
    """Whether a colour's relative luminance is mid-range: a near-white fill vanishes on a white page, a
    near-black one on a dark page."""
    r, g, b = hex_to_rgb(color)
    return 0.2 <= (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 <= 0.8


def _far_apart_first(colors: Sequence[tuple[int, int, int]]) -> tuple[tuple[int, int, int], ...]:
    """``colors`` reordered so each next one is the farthest from all before it (the first kept): the first
    types of a model (and the few tags of a small model) get the most different colours."""
    def distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
        return sum(w * (x - y) ** 2 for w, x, y in zip((2, 4, 3), a, b))   # weighted RGB, roughly perceptual

    chosen, left = [colors[0]], list(colors[1:])
    while left:
        chosen.append(left.pop(max(range(len(left)), key=lambda i: min(distance(left[i], c) for c in chosen))))
    return tuple(chosen)


# Alphabet's colours that show as a translucent fill on both themes (more than the 17 UPOS tags), far apart first.
PALETTE: tuple[tuple[int, int, int], ...] = _far_apart_first([hex_to_rgb(c) for c in qualitative.Alphabet
                                                              if _shows_on_light_and_dark(c)])
COLORS = len(PALETTE)


def tag_type(label: str) -> str:
    """The colour key of a tag: its type after the first ``-`` (``B-PER`` → ``PER``; ``NOUN`` → ``NOUN``)."""
    return label.split("-", 1)[-1]


def color_classes(labels: Sequence[str]) -> dict[str, int]:
    """Tag type -> colour number, in the order the model's labels first name each type (``O`` has none),
    so a type keeps its colour from one input to the next; cycled only past ``COLORS`` types."""
    types = [tag_type(label) for label in labels]
    return {kind: i % COLORS for i, kind in enumerate(k for k in dict.fromkeys(types) if k not in PLAIN)}


def fill(number: int) -> str:
    """The CSS fill of colour ``number``: its palette colour, translucent."""
    r, g, b = PALETTE[number % COLORS]
    return f"rgba({r}, {g}, {b}, {FILL_ALPHA})"


def tag_title(label: str, score: float | None = None) -> str:
    """A hover title: the label (with its probability) and, for a UPOS tag, its name: ``ADP 97% — adposition
    (a preposition such as 'in', 'of')``. Not escaped."""
    head = label if score is None else f"{label} {percent(score)}"
    name = upos_meaning(label)
    return f"{head} — {name}" if name else head


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def legend_html(colors: dict[str, int]) -> str:
    """One swatch per tag type in its colour; a UPOS tag's short name beside it and its full name on hover."""
    items = []
    for kind, n in colors.items():
        name = upos_short(kind)
        named = f' <span class="tw-name">{_escape(name)}</span>' if name else ""
        items.append(f'<mark class="tw tw-c{n}" style="background: {fill(n)}" title="{_escape(tag_title(kind))}">'
                     f'<span class="tw-tag">{_escape(kind)}</span>{named}</mark>')
    return f'<div class="tw-legend">{"".join(items)}</div>'


def tagged_html(text: str, spans: Sequence[tuple[int, int, str, float]], colors: dict[str, int]) -> str:
    """``text`` with each ``(start, end, label, score)`` span marked: its characters coloured by the label's
    type, ``label probability`` under them (the hover title adds a UPOS tag's name); the rest as plain text."""
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
            parts.append(f'<mark class="tw tw-c{number}" style="background: {fill(number)}" '
                         f'title="{_escape(tag_title(label, score))}"><span class="tw-text">{shown}</span>'
                         f'<span class="tw-tag">{caption}</span></mark>')
        at = end
    parts.append(_escape(text[at:]))
    return f'<div class="tagged-words">{legend_html(colors)}<div class="tw-body">{"".join(parts)}</div></div>'
