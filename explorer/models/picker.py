"""The model picker above the tabs: one dropdown every probing tab reads its model from.

The dropdown's value is a model key (see ``explorer.models.keys``): the bundled default, the
live training run, any checkpoint of any run (newest first, with step and loss), or a local
folder / hub model loaded with the box next to it (``/load_model``). The list is filled again when a
page loads and refreshes itself while a run writes checkpoints. Each browser picks its own model.

The dropdown accepts values outside its choices: its choices are per browser session, and an API
client (a new session) must be able to name every key the app serves now (``live``, a checkpoint
written after start, a model another session loaded). ``Services.model`` checks the key and answers
an unknown one with the keys available now.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from explorer.endpoints import endpoint, handler
from explorer.models.description import describe
from explorer.models.keys import KeyKind
from explorer.models.choices import ModelChoice
from explorer.models.registry import ModelRegistry, UnknownModelError
from explorer.services import Services
from explorer.ui_errors import shown

REFRESH_S = 5.0
LOAD_PLACEHOLDER = "owner/name, or a model folder"        # short: it must fit the box at 390 px
LOAD_INFO = "a model on the Hugging Face hub, or a folder inside the allowed model folders"


@dataclass
class ModelPicker:
    """The picker's widgets; tabs take ``dropdown`` as their first input."""

    dropdown: gr.Dropdown
    source: gr.Textbox
    load_button: gr.Button
    info: gr.Markdown
    seen: gr.State                         # the keys this page's dropdown lists
    admin_token: gr.Textbox | None = None  # public mode only: needed to load local folders


def dropdown_choices(choices: list[ModelChoice]) -> list[tuple[str, str]]:
    """(label, key) pairs for ``gr.Dropdown``."""
    return [(c.label, c.key) for c in choices]


def initial_value(choices: list[ModelChoice]) -> str | None:
    """``default`` when bundled, else the newest checkpoint, else nothing."""
    keys = [c.key for c in choices]
    return "default" if "default" in keys else (keys[0] if keys else None)


def model_info(services: Services, key: str | None) -> str:
    """Markdown describing the chosen model (or why there is none)."""
    if not key:
        return ("No model is loaded yet: start a training run (its checkpoints appear here) "
                "or load a local folder or hub model.")
    try:
        with services.probing():
            return describe(services.model(key))
    except (ValueError, OSError) as exc:     # FileNotFoundError, ConnectionError included
        return f"⚠️ {shown(str(exc))}"


def _widgets(services: Services, choices: list[ModelChoice]) -> dict[str, Any]:
    """The picker's row (the dropdown, the box to load another model, the admin token where asked, the button)
    and the model's description below it."""
    with gr.Row(elem_id="model-picker"):
        with gr.Column(scale=3):
            dropdown = gr.Dropdown(choices=dropdown_choices(choices), value=initial_value(choices),
                                   label="Model (used by every probing tab)", interactive=True,
                                   allow_custom_value=True)
        with gr.Column(scale=2):
            source = gr.Textbox(label="Load another model", placeholder=LOAD_PLACEHOLDER, info=LOAD_INFO, max_lines=1)
        admin_token = None
        if services.access.asks_for_token:
            with gr.Column(scale=1, min_width=160):
                admin_token = gr.Textbox(label="Admin token", type="password", max_lines=1,
                                         placeholder="for local folders")
        with gr.Column(scale=1, min_width=120):
            load_button = gr.Button("Load", variant="secondary")
    info = gr.Markdown(elem_classes=["model-info"])
    return {"dropdown": dropdown, "source": source, "admin_token": admin_token, "load_button": load_button,
            "info": info}


def _load_handler(services: Services, registry: ModelRegistry) -> Callable[..., tuple[Any, str]]:
    """The /load_model endpoint's handler (one for the button and Enter in the box)."""
    def load_model(source_text: str, token: str = "",
                   progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple[Any, str]:
        """Load a model and select it in the picker.

        Args:
            source_text: 'default', a checkpoint key, a local model folder, or a hub id 'owner/name'.
            token: the admin token (public mode only; needed for local folders).
        Returns:
            the picker (now on that model) and a description of the model and its heads.
        """
        progress(0.0, desc="Finding the model…")
        try:
            key = registry.resolve(source_text)          # the text is read once; the ModelKey travels on
            if key.kind is KeyKind.LOCAL:
                services.access.require_admin(token, "load models from local folders")
            # A hub download reports each file's bytes here: huggingface_hub's tqdm bars, tracked by Gradio.
            progress(0.1, desc="Downloading from the hub…" if key.kind is KeyKind.HUB else "Reading the weights…")
            key = registry.canonical(key)   # a local folder's key names no server path (explorer.models.local_folders)
            with services.probing():
                loaded = registry.get(key)
        except UnknownModelError as exc:
            raise UnknownModelError(registry.unknown_key_message(exc)) from None
        progress(1.0, desc="Loaded")
        return gr.update(choices=dropdown_choices(registry.choices()), value=key.text), describe(loaded)

    return handler(load_model, "load_model", gpu=False)     # loads a model, runs none; one handler, two triggers


def _refresh_handler(registry: ModelRegistry) -> Callable[..., tuple[Any, tuple[str, ...]]]:
    """The timer's check: new choices when the registry's keys changed since ``previous``."""
    def refresh(previous: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        current = registry.choices()
        keys = tuple(c.key for c in current)
        if keys == previous:
            return gr.skip(), previous
        return gr.update(choices=dropdown_choices(current)), keys

    return refresh


def build(services: Services) -> ModelPicker:
    """Create the picker inside the current layout and wire it."""
    registry = services.registry()
    choices = registry.choices()
    w = _widgets(services, choices)
    dropdown, source, admin_token, load_button, info = (w[name] for name in ("dropdown", "source", "admin_token",
                                                                            "load_button", "info"))
    seen = gr.State(tuple(c.key for c in choices))
    _wire_load(_load_handler(services, registry), source, admin_token, load_button, dropdown, info)

    def show_info(key: str | None) -> str:
        return model_info(services, key)

    endpoint(dropdown.change, show_info, [dropdown], [info], api_name="model_info", gpu=False, clear=False,
             api_visibility="private", show_progress="hidden")
    gr.Timer(REFRESH_S).tick(_refresh_handler(registry), inputs=[seen], outputs=[dropdown, seen],
                             api_visibility="private", show_progress="hidden")
    return ModelPicker(dropdown, source, load_button, info, seen, admin_token)


def _wire_load(load: Callable[..., Any], source: Any, admin_token: Any, load_button: Any, dropdown: Any,
               info: Any) -> None:
    """Wire loading a model on the button (public /load_model) and on Enter in the box (private)."""
    load_inputs = [source] + ([admin_token] if admin_token is not None else [])
    # The progress (its steps and a hub download's per-file bars) shows over the "Load another model" box
    # (show_progress_on), never over the picker and the description of the model still in use: a failed
    # event lays Gradio's "Error" badge where its progress was. The failure follow-up lifts that badge off the
    # box (the message comes as a toast), so the text typed stays in view to be corrected.
    for trigger, name, visibility in ((load_button.click, "load_model", "public"),
                                      (source.submit, "load_model_submit", "private")):
        busy = trigger(lambda: gr.update(value="Loading…", interactive=False), outputs=[load_button], queue=False,
                       api_visibility="private", show_progress="hidden")
        loading = endpoint(busy.then, load, load_inputs, [dropdown, info], api_name=name, api_visibility=visibility,
                           clear=False, show_progress="full", show_progress_on=[source])
        loading.failure(lambda: gr.update(), outputs=[source], queue=False, api_visibility="private",
                        show_progress="hidden")
        loading.then(lambda: gr.update(value="Load", interactive=True), outputs=[load_button], queue=False,
                     api_visibility="private", show_progress="hidden")


def on_page_load(services: Services, key: str | None) -> tuple[Any, tuple[str, ...], str]:
    """What a page shows when it (re)loads: the models available now (not the list of when the app
    started: a run may have written checkpoints since), the same model as before if it is still there,
    and that model's description."""
    current = services.registry().choices()
    keys = tuple(c.key for c in current)
    value = key if key in keys else initial_value(current)
    return gr.update(choices=dropdown_choices(current), value=value), keys, model_info(services, value)


def wire_page_load(demo: gr.Blocks, services: Services, picker: ModelPicker, after: Any = None) -> Any:
    """Fill the picker with the current models when a page loads (no wait for the refresh timer); right after
    the event ``after`` when given (a link's model and fields are set first: explorer/serving/links). Returns
    the event."""
    trigger = after.then if after is not None else demo.load
    return trigger(lambda key: on_page_load(services, key), inputs=[picker.dropdown],
                   outputs=[picker.dropdown, picker.seen, picker.info], api_visibility="private",
                   show_progress="hidden")
