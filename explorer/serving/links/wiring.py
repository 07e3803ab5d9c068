"""The links' events: a *Copy link* row at the top of every tab (:func:`copy_row`) and, once every tab is built,
:func:`install`: each row's button wired to its tab's fields, and the page load that reads a link.

*Copy link* sends the tab's field values to :func:`query.build_query` (a text too long for a link is cut, and a
warning says so) and shows the link in the box beside the button; the browser then makes it a full address,
writes it to the clipboard (``assets/page.js``: ``BertExplorerLinks.copy``) and says "Link copied" on the button,
or, where the clipboard is refused (a page served over plain http, a browser that asks), selects the box's text
to copy by hand.

Opening a link: when the page loads, ``open_link`` reads the page address's query (``gr.Request.query_params``),
selects the tab (and the inner tab), picks the model and fills the fields, each warning shown once. The model
picker's own page load comes next (it keeps the link's model, and the tabs fit their sliders to that model from
the link's values, not over them); then the browser presses the tab's own main button once
(``BertExplorerLinks.run``: the existing event, with its progress, follow-ups and error handling, not a copy of
it). Nothing is stored on the server.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gradio as gr

from explorer.endpoints import endpoint
from explorer.serving.links.models import PickerRules
from explorer.serving.links.query import BoundLink, bind_all, build_query, parse_query, widget_at
from explorer.services import Services

COPY_LABEL = "Copy link"
MAX_WARNINGS = 4              # toasts shown when a link is opened; the rest are summed up in the last one
RUN_CLASS = "link-run-"       # + the run target: the class of the button a link presses
COPY_JS = "(query) => window.BertExplorerLinks ? window.BertExplorerLinks.copy(query, {tab!r}) : query"
RUN_JS = "(target) => { if (target && window.BertExplorerLinks) window.BertExplorerLinks.run(target); return []; }"


@dataclass
class CopyRow:
    """A tab's *Copy link* button and the box that shows the copied link (hidden until the first copy)."""

    button: gr.Button
    box: gr.Textbox


def copy_row(tab_id: str) -> CopyRow:
    """The *Copy link* row, at the top of the current ``gr.Tab`` (its ids: ``copy-link-<tab>``,
    ``copy-link-box-<tab>``)."""
    with gr.Row(elem_classes=["copy-link-row"]):
        button = gr.Button(COPY_LABEL, size="sm", variant="secondary", scale=0, min_width=110,
                           elem_id=f"copy-link-{tab_id}", elem_classes=["copy-link"])
        box = gr.Textbox(label="Link to this view (add &embed=1 for the view alone)", visible=False, max_lines=1,
                         scale=4, buttons=["copy"], elem_id=f"copy-link-box-{tab_id}", elem_classes=["copy-link-box"])
    return CopyRow(button, box)


def run_target(tab: str, section: str = "") -> str:
    """The name of a tab's (or inner tab's) main button for ``BertExplorerLinks.run``."""
    return f"{tab}-{section}" if section else tab


def _add_class(component: Any, name: str) -> None:
    classes = component.elem_classes
    classes = [classes] if isinstance(classes, str) else list(classes or [])
    if name not in classes:
        component.elem_classes = [*classes, name]


def _copy_handler(bound: BoundLink, paths: list[tuple[str, ...]], shown: list[tuple[str, ...]],
                  with_section: bool) -> Callable[..., Any]:
    """The handler of a tab's *Copy link*: (section id when the tab has inner tabs, the shown outputs, the field
    values) -> the box, showing the link's query."""
    def copy_link(*inputs: Any) -> Any:
        values = list(inputs)
        section_id = values.pop(0) if with_section else None
        outputs, fields = values[:len(shown)], values[len(shown):]
        section = bound.section(section_id)
        by_path = dict(zip(paths, fields))
        seen = section.section.shown
        result = outputs[shown.index(seen)] if seen in shown else None
        built = build_query(bound, section.section.id, {s.key: by_path.get(s.field.path) for s in section.specs},
                            shown=bool(result and str(result).strip()))
        for note in built.notes:
            gr.Warning(note)
        return gr.update(visible=True, value=built.query)

    return copy_link


def _wire_copy(bound: BoundLink, widgets: Mapping[str, Any], row: CopyRow, picker: Any,
               section_state: Any | None) -> None:
    """Wire ``row``'s button to ``bound``'s fields (every section's) and its shown outputs."""
    paths = [f.path for f in bound.link.fields]
    shown = list(dict.fromkeys(s.shown for s in bound.link.sections if s.shown))
    inputs = ([section_state] if section_state is not None else []) \
        + [widget_at(widgets, path, picker) for path in shown] + [widget_at(widgets, p, picker) for p in paths]
    event = endpoint(row.button.click, _copy_handler(bound, paths, shown, section_state is not None), inputs,
                     [row.box], api_name=f"copy_link_{bound.link.tab}", gpu=False, clear=False,
                     api_visibility="private", show_progress="hidden")
    event.success(None, inputs=[row.box], outputs=[row.box], js=COPY_JS.format(tab=bound.link.tab),
                  api_visibility="private")


def _follow_inner_tabs(bound: BoundLink, widgets: Mapping[str, Any], state: Any) -> None:
    """Keep ``state`` on the section of the inner tab the visitor selects (its *Copy link* copies that one)."""
    inner = widget_at(widgets, bound.link.inner or (), None)
    ids = [getattr(child, "id", None) for child in inner.children]
    by_inner = {s.section.inner_id: s.section.id for s in bound.sections}
    first = bound.sections[0].section.id

    def follow(evt: gr.SelectData) -> str:
        index = evt.index if isinstance(evt.index, int) and 0 <= evt.index < len(ids) else None
        return by_inner.get(ids[index] if index is not None else None, first)

    inner.select(follow, None, state, api_visibility="private", show_progress="hidden", queue=False)


class _Outputs:
    """The components ``open_link`` may set, each once, and the slot of each."""

    def __init__(self, *first: Any) -> None:
        self.components: list[Any] = []
        self.slots: dict[int, int] = {}
        for component in first:
            self.slot(component)

    def slot(self, component: Any) -> int:
        """``component``'s index among the outputs (added when new)."""
        key = id(component)
        if key not in self.slots:
            self.slots[key] = len(self.components)
            self.components.append(component)
        return self.slots[key]


def toasts(warnings: list[str]) -> list[str]:
    """The warnings a link's opening shows: at most ``MAX_WARNINGS``, the last one counting the rest."""
    if len(warnings) <= MAX_WARNINGS:
        return warnings
    rest = len(warnings) - MAX_WARNINGS + 1
    return [*warnings[:MAX_WARNINGS - 1], f"{rest} more of the link's values could not be used either."]


def _restore_handler(bound: Mapping[str, BoundLink], built: Mapping[str, Mapping[str, Any]], picker: Any,
                     outputs: _Outputs, states: Mapping[str, Any], services: Services) -> Callable[..., Any]:
    """``open_link``: (the picker's model, the request) -> every output (``gr.skip()`` where the link sets nothing)."""
    rules = PickerRules(services)

    def open_link(current_model: str | None, request: gr.Request) -> tuple[Any, ...]:
        query = {str(k): str(v) for k, v in (getattr(request, "query_params", None) or {}).items()}
        values: list[Any] = [gr.skip() for _ in outputs.components]
        parsed = parse_query(bound, query, rules, current_model)
        if parsed is None:
            return tuple(values)
        for warning in toasts(parsed.warnings):
            gr.Warning(warning)
        if parsed.tab is None:
            return tuple(values)
        link, widgets = bound[parsed.tab], built[parsed.tab]
        values[0] = gr.Tabs(selected=parsed.tab)
        section = link.section(parsed.section)
        if link.link.inner:
            values[outputs.slot(widget_at(widgets, link.link.inner, picker))] = gr.Tabs(
                selected=section.section.inner_id)
            values[outputs.slot(states[parsed.tab])] = section.section.id
        for spec in section.specs:
            if spec.key in parsed.values:
                values[outputs.slot(widget_at(widgets, spec.field.path, picker))] = parsed.values[spec.key]
        values[1] = run_target(parsed.tab, section.section.id if link.link.inner else "") if parsed.run else ""
        return tuple(values)

    return open_link


@dataclass
class Opening:
    """The page load that reads a link (``event``: ``open_link``), the hidden box naming the button it asks the
    browser to press (``run_box``: :func:`press_after`) and each tab's link bound to its widgets (``bound``)."""

    event: Any
    run_box: gr.Textbox
    bound: dict[str, BoundLink]


def install(demo: gr.Blocks, tabs: gr.Tabs, rows: Mapping[str, CopyRow], built: Mapping[str, Mapping[str, Any]],
            picker: Any, services: Services) -> Opening:
    """Wire every tab's *Copy link* (``rows``, by tab id) and ``open_link``, which reads a link when the page
    loads (the model picker's page load comes after it: ``model_picker.wire_page_load(..., after=...)``, then
    :func:`press_after`). Call inside the app's ``gr.Blocks``, once every tab is built (``built``: each tab's
    widgets by tab id; ``picker``: the model picker's dropdown)."""
    bound = bind_all(built, picker)
    run_box = gr.Textbox(visible=False, elem_id="link-run")        # the button to press, for the browser
    outputs = _Outputs(tabs, run_box, picker)
    states: dict[str, Any] = {}
    for tab, link in bound.items():
        widgets = built[tab]
        if link.link.inner:
            states[tab] = gr.State(link.sections[0].section.id)
            _follow_inner_tabs(link, widgets, states[tab])
        for section in link.sections:
            if section.section.action:
                _add_class(widget_at(widgets, section.section.action, picker),
                           RUN_CLASS + run_target(tab, section.section.id if link.link.inner else ""))
            for spec in section.specs:
                outputs.slot(widget_at(widgets, spec.field.path, picker))
        if link.link.inner:
            outputs.slot(widget_at(widgets, link.link.inner, None))
            outputs.slot(states[tab])
        if tab in rows:
            _wire_copy(link, widgets, rows[tab], picker, states.get(tab))
    restore = _restore_handler(bound, built, picker, outputs, states, services)
    opened = endpoint(demo.load, restore, [picker], outputs.components, api_name="open_link", gpu=False,
                      clear=False, api_visibility="private", show_progress="hidden")
    return Opening(opened, run_box, bound)


def press_after(event: Any, opening: Opening) -> None:
    """Once ``event`` (the picker's page load, after ``open_link``) is done, the browser presses the button the
    link named, if any (``BertExplorerLinks.run``)."""
    event.then(None, inputs=[opening.run_box], js=RUN_JS, api_visibility="private")
