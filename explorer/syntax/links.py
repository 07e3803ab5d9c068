"""From the Syntax tab to the Attention tab: a click on a row of the best-head table opens the Attention tab on
that row's example sentence with its head chosen, and shows it (the Attention tab's own *Show attention*).

A view change, not a computation: the click only fills the Attention tab's text, layer and head (layers from 1
in both tabs' numbering) and selects its tab; the Attention tab then runs as if the person had typed them.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from explorer.endpoints import endpoint

ATTENTION_TAB = "attention"              # the Attention tab's id in explorer.tab_registry.TABS
HEAD_COLUMN, EXAMPLE_COLUMN = 2, 7       # "best head" ("3-8": layer from 1, head from 0) and "example sentence"
# Press the Attention tab's main button once its fields are filled (runs in the browser, no request of its own).
SHOW_ATTENTION_JS = """() => {
  // after the fields took their new values: the one "Show attention" button on the page
  setTimeout(() => {
    const button = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'Show attention');
    if (button) button.click();
  }, 200);
}"""


def head_of_row(row: list[Any] | None) -> tuple[str, int, int]:
    """(example sentence, layer from 1, head from 0) of a best-head table row; ValueError when the row is not one."""
    if not row or len(row) <= EXAMPLE_COLUMN:
        raise ValueError("Click a row of the best-head table to open its head in the Attention tab.")
    layer, _, head = str(row[HEAD_COLUMN]).partition("-")
    if not (layer.isdigit() and head.isdigit()) or not str(row[EXAMPLE_COLUMN]).strip():
        raise ValueError("That row names no head and sentence; score the heads first.")
    return str(row[EXAMPLE_COLUMN]), int(layer), int(head)


def open_in_attention(evt: gr.SelectData) -> tuple[Any, str, int, int]:
    """The Attention tab selected, with the clicked row's sentence, layer and head in its fields."""
    text, layer, head = head_of_row(evt.row_value)
    return gr.Tabs(selected=ATTENTION_TAB), text, layer, head


def wire(table: Any, tabs: Any, attention: dict[str, Any]) -> None:
    """A click on ``table`` (the best-head table) opens ``attention`` (the Attention tab's widgets) on its row."""
    event = endpoint(table.select, open_in_attention, None,
                     [tabs, attention["text"], attention["layer"], attention["head"]],
                     api_name="syntax_open_head", api_visibility="private", gpu=False, clear=False, queue=False)
    event.success(None, js=SHOW_ATTENTION_JS, api_visibility="private")
