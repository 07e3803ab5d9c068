"""explorer/syntax/links.py: a best-head row opens the Attention tab on its sentence, layer and head."""
from __future__ import annotations

import gradio as gr
import pytest

from explorer.syntax import links
from explorer.syntax.views import TABLE_COLUMNS

ROW = ["det", 412, "3-8", "dependent → head", "84.1%", "57.6% (+1)", "+26.5 pt", "The cat sat on the mat."]


def test_a_row_names_its_sentence_and_head_in_the_attention_tabs_numbering() -> None:
    assert TABLE_COLUMNS[links.HEAD_COLUMN] == "best head" and TABLE_COLUMNS[links.EXAMPLE_COLUMN] == "example sentence"
    assert links.head_of_row(ROW) == ("The cat sat on the mat.", 3, 8)


def test_a_click_selects_the_attention_tab_and_fills_its_fields() -> None:
    event = gr.SelectData(None, {"index": [0, 4], "value": "84.1%", "row_value": ROW})
    tabs, text, layer, head = links.open_in_attention(event)
    assert tabs.selected == links.ATTENTION_TAB and (text, layer, head) == ("The cat sat on the mat.", 3, 8)


@pytest.mark.parametrize("row", [None, [], ROW[:5], ROW[:2] + ["best"] + ROW[3:], ROW[:7] + ["  "]])
def test_anything_but_a_scored_row_is_refused_with_a_sentence(row) -> None:
    with pytest.raises(ValueError, match="row|head"):
        links.head_of_row(row)
