"""The run controls the Training and Fine-tune tabs share: the public-mode notice, an admin-token box where
the access policy asks for one, and Start / Pause / Resume / Stop / Save checkpoint now / Refresh.

Pause, Resume, Stop and Save act only on a run in a state they can change (:func:`allowed`); elsewhere they are
greyed out (:func:`steering_updates`, sent with the status). Pause, Resume and Stop say what they asked for the
moment they are pressed (:func:`acknowledge`, in the browser), since the worker's answer can take seconds on a
machine busy training."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gradio as gr

from engine.training.worker.run_state import RunState
from explorer.serving.access import AccessPolicy

# Both tabs' runs also save a checkpoint after this much training time, so a crash or a restart of the app
# loses minutes, not the run (the fine-tune form's runs otherwise checkpoint only at their last step).
CHECKPOINT_EVERY_S = 300.0

STEERING = ("pause", "resume", "stop", "save")       # the buttons that act on the current run, in this order
# The states in which each can act: Pause before the run pauses (a run still preparing pauses once it starts
# training), Resume a paused run, Stop any run not already stopping, Save a run whose trainer exists.
ACTS_IN: dict[str, frozenset[RunState]] = {
    "pause": frozenset({RunState.PREPARING, RunState.RUNNING}),
    "resume": frozenset({RunState.PAUSED}),
    "stop": frozenset({RunState.PREPARING, RunState.RUNNING, RunState.PAUSED}),
    "save": frozenset({RunState.RUNNING, RunState.PAUSED}),
}
# What the status says the moment a button is pressed, before the worker answers.
ACKNOWLEDGEMENTS = {
    "pause": "⏸ **pausing after this step…**",
    "resume": "▶ **resuming…**",
    "stop": "⏹ **stopping…** after this step, then saving a checkpoint",
}


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

    @property
    def steering(self) -> list[gr.Button]:
        """Pause, Resume, Stop and Save (``STEERING``'s order): the outputs of :func:`steering_updates`."""
        return [self.pause, self.resume, self.stop, self.save]


def allowed(state: RunState | str) -> dict[str, bool]:
    """For each of ``STEERING``: whether it can act on a run in ``state``."""
    state = RunState(state)
    return {name: state in ACTS_IN[name] for name in STEERING}


def steering_updates(state: RunState | str, enabled: bool = True) -> tuple[Any, ...]:
    """``gr.Button`` updates for Pause, Resume, Stop and Save: interactive where they can act on a run in
    ``state`` and training is ``enabled`` (the access policy)."""
    return tuple(gr.Button(interactive=enabled and can) for can in allowed(state).values())


def run_controls(access: AccessPolicy, state: RunState | str | None = None) -> RunControls:
    """Create the notice (public mode) and the row of controls inside the current layout; the controls are
    disabled where the policy allows no training (``access.training_enabled``), and with ``state`` (the run's
    when the page is built) Pause, Resume, Stop and Save only where they can act (:func:`allowed`)."""
    if access.public:
        gr.Markdown(access.notice(), elem_classes=["access-notice"])
    enabled = access.training_enabled
    can = allowed(state) if state is not None else dict.fromkeys(STEERING, True)
    with gr.Row():
        admin = ([gr.Textbox(label="Admin token", type="password", max_lines=1, scale=2)]
                 if access.asks_for_token else [])
        return RunControls(admin=admin,
                           start=gr.Button("Start", variant="primary", interactive=enabled),
                           pause=gr.Button("Pause", interactive=enabled and can["pause"]),
                           resume=gr.Button("Resume", interactive=enabled and can["resume"]),
                           stop=gr.Button("Stop", interactive=enabled and can["stop"]),
                           save=gr.Button("Save checkpoint now", interactive=enabled and can["save"]),
                           refresh=gr.Button("Refresh", size="sm"))


def acknowledgement_js(name: str) -> str:
    """The browser-side function that writes ``ACKNOWLEDGEMENTS[name]`` into the status."""
    return f"() => {json.dumps(ACKNOWLEDGEMENTS[name], ensure_ascii=False)}"


def acknowledge(controls: RunControls, status: Any) -> None:
    """Pause, Resume and Stop write what they asked for into ``status`` at once, in the browser (no request:
    nothing to wait for); the worker's own answer replaces it."""
    for name in ACKNOWLEDGEMENTS:
        getattr(controls, name).click(None, None, status, js=acknowledgement_js(name), queue=False,
                                      api_visibility="private", show_progress="hidden")
