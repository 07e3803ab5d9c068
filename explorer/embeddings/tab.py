"""Embeddings tab: how word, segment and position embeddings add up, and what they have learned. Here the
widgets (``explorer.embeddings.sections``) are made and wired to the endpoints; what they show is
``explorer.embeddings.views``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.model.loaded_model import LoadedModel
from engine.probes.inference import embeddings
from explorer.embeddings import corpus_neighbours, download, sections, shown
from explorer.embeddings.shown import ShownInput
from explorer.embeddings.sections import EXAMPLES
from explorer.embeddings.views import (check_component, chosen_position, heatmap_value, neighbour_frame,
                                       over_training, show_embeddings)
from explorer.models.picker import ModelPicker
from explorer.runs import run_picker as run_picker
from explorer.views.canvas_view import event
from explorer.endpoints import endpoint, handler, wire_run
from explorer.glossary import LAYER_RULE, gloss
from explorer.services import Services

DEFAULT_LAYERS = 12            # the layer slider's value until a model is known

INTRO = f"""\
BERT's input vector for each token is the **sum of three learned embeddings** — the word piece
(token), its segment (A or B) and its position — passed through a LayerNorm; that is the
"embedding output" the first layer reads. Look for: neighbouring positions having similar
position embeddings (a bright band along the diagonal), segments A and B differing by exactly one
learned vector, and a repeated word starting from the same word embedding but drifting apart
layer by layer as context changes its vector.

**{gloss("layer", "Layer numbers")}:** {LAYER_RULE} The flat pictures of many-dimensional vectors are drawn
by {gloss("PCA")}; "nearest" and "similar" are by {gloss("cosine similarity")} (1 = the same direction).
"""


def layer_slider_update(services: Services, model_key: str | None, current: float | int | None) -> Any:
    """Fit the layer slider to the picked model (0..L); keep the current layer when it still exists."""
    try:
        num_layers = services.model(model_key).config.num_hidden_layers
    except Exception:  # noqa: BLE001 - the picker itself reports load errors
        return gr.skip()
    value = num_layers if current is None or current > num_layers else current
    return gr.update(maximum=num_layers, value=value)


def _initial_layers(services: Services, key: str | None) -> int:
    """The picked model's layer count from its config alone: building the UI never loads weights
    (a cold start would wait for them); the slider is refitted when the page loads."""
    config = services.registry().peek_config(key) if key else None
    return config.num_hidden_layers if config is not None else DEFAULT_LAYERS


# --- the handlers (the endpoints' API: parameter names, defaults and docstrings) ---------

def _main_handlers(services: Services) -> tuple[Callable[..., tuple[Any, ...]], Callable[..., tuple[Any, ...]]]:
    """The tab's main action (one handler for its button, Enter and the examples) and the redraw that reruns it
    when the layer moves."""
    def run(model_key: str, text: str, text_pair: str, layer: float, component: str, token: str) -> tuple[Any, ...]:
        """Decompose a text's input embeddings on the picked model.

        Args:
            model_key: the model (see /load_model and the picker); 'default' for the bundled one.
            text: segment A.
            text_pair: optional segment B; empty for none.
            layer: layer for the contextual PCA, 0 (embedding output) .. number of layers.
            component: heatmap component: word, position, segment, sum or output.
            token: 'first' for the text's first word, 'all' for every token's neighbours, or a token position.
        Returns:
            summary, norms, dimensions heatmap and position similarity (canvas views' values: dicts of arrays,
            decode with explorer.embeddings.canvas.decoded), position PCA, contextual PCA, segment difference,
            neighbours table, token choice.
        """
        return show_embeddings(services, model_key, text, text_pair, layer, component, token)

    run = handler(run, "embeddings")          # made once: the three triggers and the redraw below call it

    def refresh(*inputs: Any, held: ShownInput | None = None) -> tuple[Any, ...]:
        if len(inputs) > 6:                         # the main inputs, then what the page shows (its state)
            *inputs, held = inputs
        if not inputs[1] or not str(inputs[1]).strip():
            return tuple(gr.skip() for _ in range(len(SHOWN) + 2))   # nothing typed yet: leave the views alone
        out = run(*inputs)
        if not isinstance(held, ShownInput) or held.result_id != out[-1].result_id:
            return out                              # another input (or model): every view
        keep = [name in LAYER_VIEWS for name in SHOWN] + [False, True]   # the token choice stays, the state moves
        return tuple(value if kept else gr.skip() for value, kept in zip(out, keep))

    return run, refresh


def _redraw_handlers(services: Services) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The dimensions view's ``fetch`` (a component the page lacks) and the neighbours for another token, both
    from the result the page's key names (the forward cache: no model run while it keeps it)."""
    def fetch_component(component: str, held: ShownInput | None) -> Any:
        check_component(component)
        return heatmap_value(shown.result_of(services, held), component, only=[component])

    def refilter(token: str, held: ShownInput | None) -> Any:
        result = shown.result_of(services, held)
        if result is None:
            return gr.skip()
        return neighbour_frame(result, chosen_position(token, result))

    return fetch_component, refilter


def _over_training_handler(services: Services) -> Callable[..., tuple[str, go.Figure]]:
    """The *Over training* button's handler."""
    def run_over_training(model_key: str, positions: float, run: str = run_picker.AUTO,
                          progress: gr.Progress = gr.Progress()) -> tuple[str, go.Figure]:
        """Position-embedding similarity at up to six checkpoints of a training run.

        Args:
            model_key: a checkpoint key picks its run; any other key uses the newest run (unless run is given).
            positions: how many positions each matrix covers (8..128).
            run: the run's name (a folder under the runs folder); empty for the picked checkpoint's run, else the newest.
        Returns:
            a Markdown summary and the small-multiples figure.
        """
        return over_training(services, model_key, positions, progress, run)

    return run_over_training


def _fit_handler(services: Services) -> Callable[..., Any]:
    """Fits the layer slider to the picked model."""
    def fit_layers(model_key: str, current: float) -> Any:
        return layer_slider_update(services, model_key, current)

    return fit_layers


# --- the tab -----------------------------------------------------------------------------

def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Embeddings tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    fields = sections.inputs(_initial_layers(services, picker.dropdown.value))
    w = {**fields, **sections.views(fields["text"], fields["pair"]), **download.section(),
         **sections.over_training(services)}
    w["corpus"] = corpus_neighbours.build_ui(services, picker)
    _wire(services, picker, w)
    download.wire(picker, w)                  # *Download as HTML*: the maps the page shows, as one file
    return {name: w[name] for name in WIDGETS}


WIDGETS = ("text", "pair", "layer", "component", "token", "button", "summary", "norms", "heatmap",
           "position_similarity", "position_pca", "contextual_pca", "segment_difference", "table", "state",
           "positions", "over_button", "over_message", "over_plot", "corpus")      # what :func:`build` returns
LAYER_VIEWS = ("summary", "contextual_pca")   # what a layer change on the same input redraws (the rest stays)
SHOWN = ("summary", "norms", "heatmap", "position_similarity", "position_pca", "contextual_pca",
         "segment_difference", "table")                                          # the main action's views


def _wire(services: Services, picker: ModelPicker, w: dict[str, Any]) -> None:
    """Declare the tab's events on its widgets ``w`` (in the order the API lists them)."""
    shown = [w[name] for name in SHOWN]
    layer, component, token, state = w["layer"], w["component"], w["token"], w["state"]
    run, refresh = _main_handlers(services)
    main_inputs = [picker.dropdown, w["text"], w["pair"], layer, component, token]
    wire_run(w["button"], w["text"], w["examples"], run, main_inputs, [*shown, token, state],
             api_name="embeddings", clear=[*shown, state], show_progress="minimal")   # the token choice stays
    # The summary and the contextual PCA follow the layer whatever moved it: a drag, the arrow keys, a number
    # typed into the box (Enter or not), or a refit to a new model (as the Attention tab's layer does). While
    # the slider is dragged, only the last value queues; with no text yet, nothing runs.
    endpoint(layer.change, refresh, [*main_inputs, state], [*shown, token, state], api_name="embeddings_refresh", gpu=False,
             clear=[*shown, state], api_visibility="private", trigger_mode="always_last", show_progress="minimal")
    fetch_component, refilter = _redraw_handlers(services)
    redraw: dict[str, Any] = dict(clear=False, api_visibility="private", show_progress="hidden")
    # A component change the page holds is drawn there; else its view fires "fetch" for that component alone.
    endpoint(event(w["heatmap"], "fetch"), fetch_component, [component, state], [w["heatmap"]],
             api_name="embeddings_component", **redraw)
    endpoint(token.input, refilter, [token, state], [w["table"]], api_name="refilter", **redraw)
    endpoint(w["over_button"].click, _over_training_handler(services), [picker.dropdown, w["positions"],
             w["over_run"]], [w["over_message"], w["over_plot"]], api_name="embeddings_over_training",
             heavy=True)
    # The picker's info is (re)written on page load and whenever the model changes: fit the slider then.
    # Only after it: a second fit on the dropdown's own change raced this one and sent the old layer
    # against the new, smaller maximum ("Value 6 is greater than maximum value 2" in the browser).
    picker.info.change(_fit_handler(services), inputs=[picker.dropdown, layer], outputs=[layer],
                       api_visibility="private", show_progress="hidden")


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each example on ``loaded`` (the demo warm-up runs them)."""
    return [(f"embeddings {i}", lambda t=text, p=pair: embeddings(loaded, t, p or None))
            for i, (text, pair) in enumerate(EXAMPLES)]
