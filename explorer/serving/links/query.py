"""A whole link: a tab's schema bound to its built widgets (:func:`bind`), a page address's query read into field
values (:func:`parse_query`), and field values written as a query of bounded length (:func:`build_query`).

Reading never fails: unknown keys are ignored, a bad value gives the widget's default and a sentence, a model
key the visitor cannot use gives the picker's own sentence (``models.py``) and leaves the picker alone, and then
the tab's button is not pressed (the view would show another model than the link meant). Writing keeps a link
under :data:`MAX_QUERY_CHARS`: a text too long for it is cut, with a note that says to how many characters.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote_plus, urlencode

import gradio as gr

from explorer.serving.links.fields import FALSE, Kind, Spec, read, write
from explorer.serving.links.schemas import LINKS, PICKER, Section, TabLink

MAX_QUERY_CHARS = 4000        # a copied link's query, encoded: under every browser's, server's and chat app's limit
SAFE = ",:/"                  # left as they are in a query (readable heads lists and model keys)
TAB_KEYS = ("tab", "view")    # ``view=`` is ``tab=`` (the spelling for embed links)


class ModelRules(Protocol):
    """What reading a link asks of the models (``models.PickerRules`` serves it from the app's registry)."""

    def check(self, key: str) -> tuple[str, str | None]:
        """(the key the picker lists for ``key``, None) when the visitor may use it, else (``key``, the picker's
        sentence for it)."""
        ...

    def limits(self, key: str | None) -> dict[str, float]:
        """The largest layer, head and token position a link may name on ``key`` (``models.LIMITS``)."""
        ...


@dataclass(frozen=True)
class BoundSection:
    """A section with its fields bound to their widgets (``specs``, in the schema's order)."""

    section: Section
    specs: tuple[Spec, ...]


@dataclass(frozen=True)
class BoundLink:
    """A tab's link bound to its built widgets."""

    link: TabLink
    sections: tuple[BoundSection, ...]

    def section(self, section_id: str | None) -> BoundSection:
        """The bound section ``section_id`` names (the first when it names none)."""
        chosen = self.link.section(section_id)
        return next(s for s in self.sections if s.section is chosen)


@dataclass
class ParsedLink:
    """What a page address asks for: its ``tab`` and ``section``, the ``values`` to set by query key, the
    ``warnings`` to show and whether to press the tab's button (``run``)."""

    tab: str | None
    section: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    run: bool = False


@dataclass(frozen=True)
class BuiltLink:
    """A copied link: its ``query`` (``?tab=...``) and ``notes`` (a text cut to fit)."""

    query: str
    notes: tuple[str, ...] = ()


def widget_at(widgets: Mapping[str, Any], path: Sequence[str], picker: Any) -> Any:
    """The widget at ``path`` in a tab's ``build`` dict (``PICKER``: ``picker``); KeyError names a missing one."""
    if path[0] == PICKER:
        return picker
    found: Any = widgets
    for part in path:
        if not isinstance(found, Mapping) or part not in found:
            raise KeyError(f"the link names {'.'.join(path)!r}, which the tab's build() does not return")
        found = found[part]
    return found


def spec_of(f: Any, widget: Any) -> Spec:
    """``f`` (a ``fields.Field``) bound to ``widget``: its default, range, whole numbers or not, and choices."""
    minimum, maximum = getattr(widget, "minimum", None), getattr(widget, "maximum", None)
    step = getattr(widget, "step", None)
    if isinstance(widget, gr.Slider):          # whole numbers as ``ui_errors.check_number_inputs`` reads them
        whole = float(step or 1).is_integer() and float(minimum or 0).is_integer()
    else:                                      # a number box by its precision; a dropdown of positions: whole
        whole = getattr(widget, "precision", 0) == 0
    choices = tuple(str(value) for _, value in (getattr(widget, "choices", None) or ())) \
        if f.kind in (Kind.CHOICE, Kind.TOKEN) else ()
    low = f.low if f.low is not None else minimum
    return Spec(f, default=getattr(widget, "value", None), low=low, high=maximum, whole=whole, choices=choices)


def bind(link: TabLink, widgets: Mapping[str, Any], picker: Any) -> BoundLink:
    """``link`` bound to a tab's built ``widgets`` (the picker's dropdown is ``picker``)."""
    return BoundLink(link, tuple(BoundSection(s, tuple(spec_of(f, widget_at(widgets, f.path, picker))
                                                       for f in s.fields)) for s in link.sections))


def _filled(value: Any) -> bool:
    return value is not None and (not isinstance(value, str) or bool(value.strip()))


def _read_models(section: BoundSection, query: Mapping[str, str], models: ModelRules,
                 parsed: ParsedLink) -> bool:
    """Check the link's model keys (set in ``parsed.values`` when usable); False when one was refused."""
    usable = True
    for spec in (s for s in section.specs if s.field.kind is Kind.MODEL and s.key in query):
        key = query[spec.key]
        too_long = (f"The link's {spec.field.label} is too long ({len(key):,} characters) to name a model; choose a "
                    "model from the list.") if len(key) > spec.field.chars else None
        listed, problem = (key, too_long) if too_long else models.check(key)
        if problem:
            parsed.warnings.append(problem)
            usable = False
        else:
            parsed.values[spec.key] = listed
    return usable


def parse_query(links: Mapping[str, BoundLink], query: Mapping[str, str], models: ModelRules,
                current_model: str | None = None) -> ParsedLink | None:
    """What ``query`` (a page address's query, as a dict) asks for; None when it names no tab (a plain visit).
    ``current_model``: the picker's model, whose shape caps the layer and head when the link names no model."""
    tab = next((query[k].strip() for k in TAB_KEYS if query.get(k, "").strip()), None)
    if tab is None:
        return None
    if tab not in links:
        known = ", ".join(links)
        return ParsedLink(None, warnings=[f"The link names no tab {tab[:40]!r}; the tabs are {known}."])
    bound = links[tab]
    section_id = query.get("section", "")
    section = bound.section(section_id)
    parsed = ParsedLink(tab, section.section.id)
    if section_id and section_id != section.section.id:
        parsed.warnings.append(f"The link names no part {section_id[:40]!r} of this tab: "
                               f"{section.section.id.replace('_', ' ')} is shown.")
    usable = _read_models(section, query, models, parsed)
    limits = models.limits(parsed.values.get("model") or current_model)
    for spec in (s for s in section.specs if s.field.kind is not Kind.MODEL and s.key in query):
        value, warning = read(spec, query[spec.key], limits)
        parsed.values[spec.key] = value
        if warning:
            parsed.warnings.append(warning)
    wanted = query.get("run", "1").strip().lower() not in FALSE
    parsed.run = bool(usable and wanted and section.section.action
                      and all(_filled(parsed.values.get(name)) for name in section.section.needs))
    return parsed


def _quoted(text: str) -> str:
    return quote_plus(text, safe=SAFE)


def _encoded(pairs: list[tuple[str, str]]) -> str:
    return "?" + urlencode(pairs, quote_via=quote_plus, safe=SAFE)


def _cut_to_fit(pairs: list[tuple[str, str]], index: int, excess: int) -> int:
    """The characters of ``pairs[index]``'s text that fit when the query must lose ``excess`` encoded characters."""
    text = pairs[index][1]
    room = len(_quoted(text)) - excess
    low, high = 0, len(text)
    while low < high:                                  # the longest prefix whose encoding fits in ``room``
        middle = (low + high + 1) // 2
        if len(_quoted(text[:middle])) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def build_query(bound: BoundLink, section_id: str | None, values: Mapping[str, Any], shown: bool = True,
                max_chars: int = MAX_QUERY_CHARS) -> BuiltLink:
    """The query that reopens ``values`` (by query key, as the widgets hold them) on ``bound``'s tab, at most
    ``max_chars`` characters: the longest texts are cut to fit, each with a note. ``shown``: whether the copier
    sees a result (else ``run=0``: the link fills the fields without pressing the button). ValueError when even
    with every text emptied the link would be too long (a model key thousands of characters long)."""
    section = bound.section(section_id)
    pairs = [("tab", bound.link.tab)] + ([("section", section.section.id)] if bound.link.inner else [])
    texts: dict[int, Spec] = {}
    for spec in section.specs:
        text = write(spec, values.get(spec.key))
        if text is not None:
            if spec.field.kind is Kind.TEXT:
                texts[len(pairs)] = spec
            pairs.append((spec.key, text))
    if section.section.action and not shown:
        pairs.append(("run", "0"))
    notes: list[str] = []
    for index in sorted(texts, key=lambda i: -len(_quoted(pairs[i][1]))):
        excess = len(_encoded(pairs)) - max_chars
        if excess <= 0:
            break
        kept = _cut_to_fit(pairs, index, excess)
        pairs[index] = (pairs[index][0], pairs[index][1][:kept])
        notes.append(f"The {texts[index].field.label} was cut to {kept:,} characters to fit a link.")
    if len(_encoded(pairs)) > max_chars:
        raise ValueError(f"This view cannot fit a link of {max_chars:,} characters (its model's key is too long).")
    return BuiltLink(_encoded(pairs), tuple(notes))


def bind_all(built: Mapping[str, Mapping[str, Any]], picker: Any) -> dict[str, BoundLink]:
    """Every built tab's link bound to ``built`` (each tab's widgets by tab id, in the page's order): its schema
    in ``LINKS``, or the tab alone for a tab ``LINKS`` does not name (one added for a test)."""
    return {tab: bind(LINKS.get(tab, TabLink(tab)), widgets, picker) for tab, widgets in built.items()}
