"""The run chooser of the "over training" views: which training run's checkpoints they walk through.

Its empty value means "the picked checkpoint's run, else the run with the newest checkpoint"; the
views name the run they used. The list is read again whenever the dropdown gets focus (runs come and
go while the app serves), and, like the model picker, it accepts any value so an API client can name
a run this page has not listed yet.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from explorer.services import Services

AUTO = ""
AUTO_LABEL = "The picked checkpoint's run, else the newest run"


def run_choices(services: Services) -> list[tuple[str, str]]:
    """(label, run name) pairs, the automatic choice first."""
    return [(AUTO_LABEL, AUTO)] + [(r.label, r.name) for r in services.registry().runs()]


def build(services: Services) -> gr.Dropdown:
    """A run dropdown inside the current layout, refreshed on focus."""
    dropdown = gr.Dropdown(choices=run_choices(services), value=AUTO, label="Run", allow_custom_value=True,
                           interactive=True)

    def refresh(current: str | None) -> Any:
        choices = run_choices(services)
        return gr.update(choices=choices, value=current if current else AUTO)

    dropdown.focus(refresh, inputs=[dropdown], outputs=[dropdown], api_visibility="private", show_progress="hidden",
                   queue=False)
    return dropdown


def run_note(name: str, shown: int, total: int, first_step: int | None, last_step: int | None) -> str:
    """"Run **a** (5 checkpoints, steps 100–500): showing 5, evenly spaced, first and last included"."""
    span = f"steps {first_step}–{last_step}" if first_step != last_step else f"step {last_step}"
    return (f"Run **{name}** ({total} checkpoint{'s' if total != 1 else ''}, {span}): showing {shown}"
            + (", evenly spaced, first and last included" if shown < total else ""))
