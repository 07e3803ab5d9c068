"""Glossary tab, the last tab: every word the app uses, one sentence each (``explorer.glossary``), A to Z, with
the rule that numbers layers in every tab first. A dotted word anywhere in the app (``glossary.gloss``) shows
its sentence on hover and, clicked, opens this tab at its entry (``assets/app.js``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from explorer.glossary import LAYER_RULE, glossary_markdown
from explorer.models.picker import ModelPicker
from explorer.services import Services

TAB_TITLE = "Glossary"

INTRO = ("Every word the app uses, each in one sentence. Hover a dotted word in any tab to read its sentence; "
         "click it to come here, to its entry.")


def page_markdown() -> str:
    """The tab's text: how layers are numbered, then every entry A to Z and the part-of-speech tags."""
    return f"**How layers are numbered.** {LAYER_RULE}\n\n{glossary_markdown()}"


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The glossary as one Markdown block (no model, no events); ``services`` and ``picker`` are unused."""
    intro = gr.Markdown(INTRO, elem_classes=["tab-intro"])
    text = gr.Markdown(page_markdown(), elem_id="glossary", elem_classes=["glossary"])
    return {"intro": intro, "glossary": text}


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """The glossary runs no model: nothing to warm up."""
    return []
