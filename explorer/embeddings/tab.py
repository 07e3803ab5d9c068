"""Embeddings tab: how word, segment and position embeddings add up, and what they have learned."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Sequence

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from engine.model.loaded_model import LoadedModel
from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult
from engine.probes.inference import embeddings, embeddings_over_checkpoints
from explorer.models.registry import ModelChoice
from explorer.models.registry import evenly_spaced as spread
from explorer.embeddings import canvas, corpus_neighbours, shown
from explorer.embeddings import plots as eplots, sections
from explorer.embeddings.shown import ShownInput
from explorer.embeddings.sections import (ALL_TOKENS, DEFAULT_OVER_TRAINING_POSITIONS, EXAMPLES, FIRST_WORD,
                                          OVER_TRAINING_POSITIONS, token_choices)
from explorer.models.picker import ModelPicker
from explorer.runs import run_picker as run_picker
from explorer.views.canvas_view import event
from explorer.endpoints import endpoint, handler, wire_run
from explorer.glossary import LAYER_RULE, gloss
from explorer.runs.run_picker import run_note
from explorer.plots import empty_figure
from explorer.services import Services
from explorer.ui_errors import check_length, require_text, whole_number

EMPTY_MESSAGE = "Type some text to embed."
DEFAULT_LAYERS = 12            # the layer slider's value until a model is known
MAX_CHECKPOINTS = 6            # small multiples shown over training

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


def parse_token(value: Any, num_tokens: int) -> int | None:
    """``"all"``/empty -> None; a position ("3" or "3: word") -> 3. Unknown positions -> None with a warning."""
    text = "" if value is None else str(value).strip()
    if text.lower() in ("", ALL_TOKENS, "all tokens"):
        return None
    try:
        position = int(float(text.split(":", 1)[0]))
    except ValueError:
        raise gr.Error(f"Token choice {text!r} is neither 'all' nor a token position.", print_exception=False) from None
    if not 0 <= position < num_tokens:
        gr.Warning(f"Position {position} is not in this input (0..{num_tokens - 1}); showing all tokens.")
        return None
    return position


def first_word(segments: Sequence[str]) -> int | None:
    """The position of the first token that is not a special one ([CLS], [SEP]); None when there is none."""
    return next((i for i, segment in enumerate(segments) if segment != "special"), None)


def chosen_position(value: Any, result: EmbeddingsResult) -> int | None:
    """The position whose neighbours to show: ``FIRST_WORD`` (the default) -> the text's first word, else as
    :func:`parse_token` reads it (None = all tokens)."""
    if str(value if value is not None else "").strip().lower() in (FIRST_WORD, "first word of the text"):
        return first_word(result.segments)
    return parse_token(value, len(result.tokens))


def neighbour_frame(result: EmbeddingsResult, position: int | None) -> pd.DataFrame:
    """The nearest-neighbour table for all tokens or one position."""
    return eplots.neighbours_table(result.tokens, result.neighbour_tokens, result.neighbour_ids.tolist(),
                                   result.neighbour_scores.tolist(), position)


def summary_markdown(result: EmbeddingsResult) -> str:
    """Counts, the LayerNorm check, segment and position facts, repeated words, truncation."""
    counts = {s: result.segments.count(s) for s in ("A", "B", "special")}
    mean = {name: float(values.mean()) for name, values in result.norms.items()}
    where = "the embedding output (layer 0)" if result.layer == 0 else f"layer {result.layer} of {result.num_layers}"
    summands = [name for name in ("word", "position", "segment") if name in result.components]
    formula = " + ".join(summands)
    projected = (f" The embeddings are {result.word.shape[1]} wide; a dense layer projects the output to the hidden "
                 f"size {result.projected_to} before the first layer." if result.projected_to else "")
    lines = [
        f"**{len(result.tokens)} tokens** (A: {counts['A']}, B: {counts['B']}, special: {counts['special']}) · "
        f"embedding size {result.word.shape[1]} · contextual view at {where} · model: {result.source}",
        "Mean norms: " + " · ".join(f"{name} {mean[name]:.3f}" for name in summands) +
        f" · sum {mean['sum']:.3f} · after LayerNorm {mean['output']:.3f}. " + (
            f"Our LayerNorm({formula}) equals the model's own embedding output "
            f"(max difference {result.output_max_diff:.1e})." if result.output_max_diff <= 1e-4 else
            f"⚠️ LayerNorm({formula}) differs from the model's embedding output by up to "
            f"{result.output_max_diff:.2g} (is the model in training mode, with dropout on?).") + projected,
    ]
    if "position" not in result.components:
        lines.append("No position table: this model's positions enter inside attention (ModernBERT turns queries "
                     "and keys by rotary angles; DeBERTa adds relative-position terms to the scores), so the "
                     "position views are empty and the Attention tab shows what positions do.")
    if result.segment_difference_norm is not None:
        lines.append(f"Segments: B's embedding is A's plus one learned vector of norm "
                     f"{result.segment_difference_norm:.3f} (cosine of A and B: {result.segment_cosine:.3f}).")
    sims = result.position_similarity
    if sims.shape[0] > 1:
        adjacent = float(sims.diagonal(1).mean())
        lines.append(f"Positions (first {result.num_positions}): neighbouring positions have mean cosine "
                     f"{adjacent:.3f}; the whole matrix averages {float(sims.mean()):.3f}.")
    for repeat in result.repeats[:3]:
        p, q = repeat.positions[:2]
        lines.append(f"`{repeat.token}` at positions {p} and {q}: same word embedding; cosine "
                     f"{repeat.output_cosine:.3f} after the other summands and the norm, "
                     f"{repeat.contextual_cosine:.3f} at layer {result.layer}.")
    if result.truncated:
        lines.append(f"⚠️ truncated: {result.num_truncated_tokens} tokens dropped at max length "
                     f"{result.max_length}.")
    return "\n\n".join(lines)


def check_component(component: str) -> str:
    """``component`` when it is one of ``COMPONENTS``; else a one-sentence ``gr.Error``."""
    if component not in COMPONENTS:
        raise gr.Error(f"Unknown component {component!r}; choose one of {', '.join(COMPONENTS)}.",
                       print_exception=False)
    return component


def heatmap_value(result: EmbeddingsResult | None, component: str, only: Sequence[str] | None = None) -> Any:
    """The hidden-dimensions canvas view's value (``explorer.embeddings.canvas``) for one component (validated);
    ``gr.skip()`` before any result."""
    check_component(component)
    if result is None:
        return gr.skip()
    if component not in result.components:          # DistilBERT: no segment table
        gr.Warning(f"This model adds no {component} embedding (it adds {', '.join(result.components[:-2])}); "
                   "showing the embedding output instead.")
        component = "output"
    return canvas.dimensions_value(result, component, only)


def show_embeddings(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                    layer: float | int | None, component: str, token: Any) -> tuple[Any, ...]:
    """Validate input, run the engine and build every output of the tab (last: the small key the page's
    ``gr.State`` keeps, ``shown.ShownInput``)."""
    text = require_text(text, empty_message=EMPTY_MESSAGE)
    pair = text_pair if text_pair and text_pair.strip() else None
    if pair is not None:
        check_length(pair, "text pair")
    check_component(component)
    with services.probing():
        result, kept = shown.compute(services, model_key, text, pair, layer)
    position = chosen_position(token, result)
    return (
        summary_markdown(result),
        eplots.component_norms(result.tokens, result.norms),
        heatmap_value(result, component),
        canvas.similarity_value(result.position_similarity),
        eplots.position_pca_scatter(result.position_pca, result.position_pca_variance),
        eplots.contextual_pca_scatter(result.tokens, result.segments, result.contextual_pca, result.layer,
                                      result.contextual_pca_variance),
        eplots.segment_difference_bars(result.segment_difference, result.segment_difference_norm,
                                       result.segment_cosine),
        neighbour_frame(result, position),
        gr.update(choices=token_choices(result.tokens), value=ALL_TOKENS if position is None else str(position)),
        kept,
    )


def evenly_spaced(choices: Sequence[ModelChoice], limit: int = MAX_CHECKPOINTS) -> list[ModelChoice]:
    """At most ``limit`` checkpoints, evenly spaced (see ``explorer.models.registry.evenly_spaced``)."""
    return spread(list(choices), limit)


def over_training(services: Services, model_key: str | None, positions: float | int | None,
                  progress: Any = None, run: str | None = None) -> tuple[str, go.Figure]:
    """Position-similarity small multiples over the checkpoints of ``run`` (default: the picked checkpoint's
    run, else the newest)."""
    count = (DEFAULT_OVER_TRAINING_POSITIONS if positions is None
             else whole_number(positions, "Positions", *OVER_TRAINING_POSITIONS))
    choices = services.registry().run_checkpoints(model_key, run)
    if len(choices) < 2:
        message = (f"Over training needs at least 2 checkpoints of a training run; found {len(choices)}. "
                   "Start a run in the Training tab (it saves checkpoints as it goes), or pick a checkpoint "
                   "of a run that has several.")
        return message, empty_figure("Fewer than 2 checkpoints")
    picked = evenly_spaced(choices)
    results = []
    for i, choice in enumerate(picked):
        if progress is not None:
            progress(i / len(picked), desc=f"Loading {choice.label}…")
        label = f"step {choice.step}" if choice.step is not None else choice.label
        with services.probing():   # one model at a time: the registry's cache bounds the memory
            results += embeddings_over_checkpoints([(label, services.model(choice.key))], count)
    panels = [(f"{r.label} · adjacent {r.adjacent:.2f}", r.matrix) for r in results]
    name = choices[-1].run
    rows = "\n".join(f"| {r.label} | {r.adjacent:.3f} | {r.distant:.3f} |" for r in results)
    message = (run_note(name, len(picked), len(choices), choices[0].step, choices[-1].step)
               + f"; first {results[0].matrix.shape[0]} positions. As training goes on, a bright band forms along the diagonal: neighbouring positions "
               "become similar while distant ones do not.\n\n"
               "| checkpoint | mean cosine of neighbouring positions | of positions far apart |\n"
               f"|---|---|---|\n{rows}")
    return message, eplots.position_similarity_grid(panels)


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
    w = {**fields, **sections.views(fields["text"], fields["pair"]), **sections.over_training(services)}
    w["corpus"] = corpus_neighbours.build_ui(services, picker)
    _wire(services, picker, w)
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
