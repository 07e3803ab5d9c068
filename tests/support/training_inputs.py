"""The Training tab's Objective inputs as a page sends them: one per ``PretrainingSettings`` widget, in the order
``/train_start`` takes them (after the form's settings, before ``token``), each at its default. A raw or positional
call sends every input (Gradio refuses a short list)."""
from __future__ import annotations

import gradio as gr

from explorer.training import objective

with gr.Blocks():        # widgets are built inside a Blocks, as the tab builds them
    OBJECTIVE: dict[str, object] = {name: default for name, default, _ in
                                    objective.api_parameters(objective.build_objective())}
OBJECTIVE_DEFAULTS: list[object] = list(OBJECTIVE.values())
