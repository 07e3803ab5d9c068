"""The run controls the Training and Fine-tune tabs share: the public-mode notice, an admin-token box where
the access policy asks for one, and Start / Pause / Resume / Stop / Save checkpoint now / Refresh."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer.access import AccessPolicy

# Both tabs' runs also save a checkpoint after this much training time, so a crash or a restart of the app
# loses minutes, not the run (the fine-tune form's runs otherwise checkpoint only at their last step).
CHECKPOINT_EVERY_S = 300.0


@dataclass(frozen=True)
class RunControls:
    """The widgets of one row of run controls; ``admin`` is ``[]`` or ``[the token box]`` (event inputs)."""

    admin: list[gr.Textbox]
    start: gr.Button
    pause: gr.Button
    resume: gr.Button
    stop: gr.Button
    save: gr.Button
    refresh: gr.Button


def run_controls(access: AccessPolicy) -> RunControls:
    """Create the notice (public mode) and the row of controls inside the current layout; the controls are
    disabled where the policy allows no training (``access.training_enabled``)."""
    if access.public:
        gr.Markdown(access.notice(), elem_classes=["access-notice"])
    enabled = access.training_enabled
    with gr.Row():
        admin = ([gr.Textbox(label="Admin token", type="password", max_lines=1, scale=2)]
                 if access.asks_for_token else [])
        return RunControls(admin=admin,
                           start=gr.Button("Start", variant="primary", interactive=enabled),
                           pause=gr.Button("Pause", interactive=enabled),
                           resume=gr.Button("Resume", interactive=enabled),
                           stop=gr.Button("Stop", interactive=enabled),
                           save=gr.Button("Save checkpoint now", interactive=enabled),
                           refresh=gr.Button("Refresh", size="sm"))
