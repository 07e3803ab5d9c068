"""Attention tab: every head's attention map for one input, head statistics, head ablation,
exports, and one head over training checkpoints. Here the widgets (``explorer.attention.sections``) are made,
fitted to the picked model and wired to the endpoints; what the main action shows is ``explorer.attention.views``,
what the other buttons do ``explorer.attention.actions``."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from engine.probes.inference import attention, neuron_view
from explorer.views import canvas_view as canvas_view
from explorer.attention import canvas, download, sections
from explorer.attention.actions import (export_files, model_shape, over_training, run_ablation, summary_markdown,
                                        view_heads)
from explorer.attention.sections import EXAMPLES
from explorer.attention.views import attention_input, attention_views, stats_table, statistic_figure, with_png_name
from explorer.runs import run_picker as run_picker
from explorer.endpoints import endpoint, handler, wire_run
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services

DEFAULT_SHAPE = (12, 12)       # layers, heads when the picked model cannot be read at build time

INTRO = """\
Each head turns every token into a weighted look at all tokens: **row *i* of a head's map
shows where token *i* looks** (its weights, a {softmax}, sum to 1). Look for heads that send almost
everything to `[SEP]` or `[CLS]` (often a "no-op" when the head has nothing to do), heads
that look at the previous or next token, and heads that link a pronoun like *it* to the noun
it stands for. Then **remove a head** ({ablation}) and watch the masked-LM loss: a head whose
removal barely changes it was not doing much on this input.

**How layers are numbered** (the same in every tab): {layer} 0 is the embeddings' output, and layers 1 to L
are the outputs of the L encoder layers; the heads of layer *k* are the ones that make layer *k*'s output, so
the layer slider starts at 1. Heads are numbered from 0.
""".format(softmax=gloss("softmax"), ablation=gloss("ablation"), layer=gloss("layer", "Layer"))


# --- the widgets fitted to the picked model ----------------------------------------------

def slider_updates(services: Services, model_key: str | None, layer: Any, head: Any, heads: Any) -> tuple[Any, ...]:
    """Fit the layer/head sliders and the head-view choices to the chosen model (skip if it will not load)."""
    try:
        with services.probing():
            layers, num_heads = model_shape(services.model(model_key))
    except Exception:  # noqa: BLE001 - the picker itself reports why a model does not load
        return gr.skip(), gr.skip(), gr.skip()
    current = [int(h) for h in (heads or []) if 0 <= int(h) < num_heads] or list(range(num_heads))
    return (gr.update(minimum=1, maximum=layers, value=min(max(int(layer or 1), 1), layers)),
            gr.update(maximum=num_heads - 1, value=min(int(head or 0), num_heads - 1)),
            gr.update(choices=[(str(h), h) for h in range(num_heads)], value=current))


def _initial_shape(services: Services, key: str | None) -> tuple[int, int]:
    """(layers, heads) from the picked model's config alone: building the UI never loads weights (a cold
    start would wait for them); the sliders get refitted when the page loads or the model changes."""
    config = services.registry().peek_config(key) if key else None
    return (config.num_hidden_layers, config.num_attention_heads) if config is not None else DEFAULT_SHAPE


# --- the handlers (the endpoints' API: parameter names, defaults and docstrings) ---------

def _main_handlers(services: Services) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The tab's main action (one handler for its three triggers) and the *Head statistic* change's redraw (the
    statistics heatmap alone, from the cached forward: the page holds the rest)."""
    def run(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
            heads: list[int], statistic: str) -> tuple[Any, ...]:
        """Attention maps of every head for a text (and optional pair).

        Args:
            model_key: the model picker's key ('default', 'checkpoint:<run>/<step-dir>', ...).
            text: the text (segment A).
            text_pair: optional second text (segment B); empty for none.
            layer: layer to show large, from 1 (layer 0 is the embeddings' output, which has no attention).
            head: head to show large, from 0.
            max_length: longest sequence in tokens, specials included.
            heads: heads drawn in the head view (from 0); the chosen head is drawn strongest.
            statistic: head statistic to map: entropy, cls, sep, self, prev, next or distance.
        Returns:
            heatmap, head view and model view (each a dict of compact arrays the page draws on canvas: see
            docs/design/browser-views.md), statistic heatmap, statistics table, summary.
        """
        *views, stats, table, summary = attention_views(services, model_key, text, text_pair, layer, head,
                                                        max_length, heads, statistic)
        return (*views, with_png_name(stats, f"head-statistics-{statistic or 'entropy'}"), table, summary)

    def statistic_changed(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
                          heads: list[int], statistic: str) -> Any:
        if not text or not str(text).strip():
            return gr.skip()                                # nothing typed yet: leave the figure alone
        result, *_, statistic, _ = attention_input(services, model_key, text, text_pair, layer, head, max_length,
                                                   heads, statistic)
        return with_png_name(statistic_figure(result, statistic), f"head-statistics-{statistic}")

    return handler(run, "attention"), handler(statistic_changed, "attention_refresh")


def _view_handlers(services: Services) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The canvas views' ``fetch`` of a layer they lack (only the heatmap's value when the event names the input
    the page holds, ``canvas.input_id``) and a *Heads in the head view* change (the head view's value alone, its
    ``id`` None: the browser draws it from the maps it holds)."""
    def fetch(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
              heads: list[int], statistic: str, evt: gr.EventData) -> tuple[Any, ...]:
        if not text or not str(text).strip():
            return tuple(gr.skip() for _ in range(6))
        result, index, head, chosen, statistic, view_id = attention_input(services, model_key, text, text_pair,
                                                                          layer, head, max_length, heads, statistic)
        if (getattr(evt, "_data", None) or {}).get("id") == view_id:   # the same input: the new layer's maps only
            return (canvas.heatmap_value(result, index, head, chosen, view_id), *(gr.skip() for _ in range(5)))
        return (*canvas.values(result, index, head, chosen, view_id),
                with_png_name(statistic_figure(result, statistic), f"head-statistics-{statistic}"),
                stats_table(result), summary_markdown(result, index, head))

    def heads_changed(model_key: str, heads: list[int]) -> dict[str, Any]:
        with services.probing():
            num_heads = model_shape(services.model(model_key))[1]
        return canvas.head_view_value(view_heads(heads, num_heads), None)

    return handler(fetch, "attention_fetch"), handler(heads_changed, "attention_heads", gpu=False)


def _ablate_handler(services: Services) -> Callable[..., Any]:
    """The *Ablate* button's handler."""
    def ablate(model_key: str, text: str, text_pair: str, heads: str, top_k: float) -> tuple[Any, ...]:
        """Remove attention heads and compare the masked-LM loss, [MASK] fillers and P(IsNext).

        Args:
            model_key: the model picker's key.
            text: the text (segment A); [MASK]s in it get their top fillers compared.
            text_pair: optional second text (segment B) for P(IsNext).
            heads: heads to remove as 'layer:head, ...' (layers from 1, heads from 0), e.g. '1:0, 2:3'; 'layer:*'
                removes a whole layer's heads.
            top_k: fillers shown per [MASK] (1..20).
        Returns:
            the baseline-vs-ablated figure and a summary.
        """
        return run_ablation(services, model_key, text, text_pair, heads, top_k)

    return ablate


def _export_handler(services: Services) -> Callable[..., Any]:
    """The *Export* button's handler."""
    def export(model_key: str, text: str, text_pair: str, layer: float, head: float,
               max_length: float) -> list[str]:
        """The chosen head's attention map as PNG, SVG and JSON files.

        Args:
            model_key: the model picker's key.
            text: the text (segment A).
            text_pair: optional second text (segment B).
            layer: layer, from 1 (the first encoder layer; 0 is the embeddings' output).
            head: head, from 0.
            max_length: longest sequence in tokens, specials included.
        Returns:
            three files: attention-L<layer>-H<head>.png, .svg and .json.
        """
        return export_files(services, model_key, text, text_pair, layer, head, max_length)

    return export


def _over_training_handler(services: Services) -> Callable[..., Any]:
    """The *Show over training* button's handler."""
    def run_over_training(model_key: str, text: str, text_pair: str, layer: float, head: float,
                          max_length: float, run: str = run_picker.AUTO,
                          progress: gr.Progress = gr.Progress()) -> tuple[Any, ...]:
        """One head's attention map and statistics at each checkpoint of a training run.

        Args:
            model_key: the model picker's key (a checkpoint picks its run; else the newest run).
            text: the text (segment A).
            text_pair: optional second text (segment B).
            layer: layer, from 1 (the first encoder layer; 0 is the embeddings' output).
            head: head, from 0.
            max_length: longest sequence in tokens, specials included.
            run: the run's name (a folder under the runs folder); empty for the picked checkpoint's run, else the newest.
        Returns:
            the maps per checkpoint, the statistics over steps, and a note.
        """
        progress(0.1, desc="Loading checkpoints…")
        maps, lines, note = over_training(services, model_key, text, text_pair, layer, head, max_length, run)
        return note, maps, lines

    return run_over_training


def add_chosen(current: str, layer: float, head: float) -> str:
    item = f"{int(layer)}:{int(head)}"
    present = [p for p in re.split(r"[,;\s]+", current or "") if p]
    return ", ".join(present if item in present else [*present, item])


def _fit_handler(services: Services) -> Callable[..., Any]:
    """Fits the layer/head sliders and the head-view choices to the picked model."""
    def fit(model_key: str, layer: float, head: float, heads: list[int]) -> tuple[Any, ...]:
        return slider_updates(services, model_key, layer, head, heads)

    return fit


# --- the tab -----------------------------------------------------------------------------

def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Attention tab's widgets inside the current ``gr.Tab`` and wire them."""
    layers, num_heads = _initial_shape(services, picker.dropdown.value)
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    fields = sections.inputs(services, layers, num_heads)
    w = {**fields, **sections.views(services, picker, fields, num_heads), **download.section(),
         **sections.ablation(), **sections.export(), **sections.over_training(services)}
    _wire(services, picker, w)
    download.wire(picker, w)                  # *Download as HTML*: the views the page shows, as one file
    return {name: w[name] for name in WIDGETS}


WIDGETS = ("text", "pair", "layer", "head", "length", "button", "view_heads", "statistic", "heatmap", "head_view",
           "model_view", "stats_plot", "stats_frame", "summary", "heads_text", "ablate_button", "ablation_figure",
           "ablation_summary", "files", "over_maps", "over_lines", "neuron")     # what :func:`build` returns


def _wire(services: Services, picker: ModelPicker, w: dict[str, Any]) -> None:
    """Declare the tab's events on its widgets ``w`` (in the order the API lists them)."""
    run, statistic_changed = _main_handlers(services)
    fetch, heads_changed = _view_handlers(services)
    layer, head, view_heads, length = w["layer"], w["head"], w["view_heads"], w["length"]
    text, pair, heads_text = w["text"], w["pair"], w["heads_text"]
    main_inputs = [picker.dropdown, text, pair, layer, head, length, view_heads, w["statistic"]]
    main_outputs = [w[name] for name in ("heatmap", "head_view", "model_view", "stats_plot", "stats_frame",
                                         "summary")]
    for event in wire_run(w["button"], text, w["examples"], run, main_inputs, main_outputs, api_name="attention",
                          show_progress="minimal"):
        w["neuron"]["follow"](event)                      # the neuron view's query choices: this input's tokens
    # The canvas views follow the layer and head in the browser, whatever moved the sliders, from the maps they
    # hold (no request); when they lack a layer's maps the heatmap fires `fetch` (assets/attention_view.js).
    endpoint(canvas_view.event(w["heatmap"], "fetch"), fetch, main_inputs, main_outputs, api_name="attention_fetch",
             api_visibility="private", trigger_mode="always_last", show_progress="minimal")
    # The head view's heads and the statistic: only what changed is sent (the page holds the maps).
    endpoint(view_heads.input, heads_changed, [picker.dropdown, view_heads], [w["head_view"]],
             api_name="attention_heads", api_visibility="private", trigger_mode="always_last", show_progress="hidden")
    endpoint(w["statistic"].input, statistic_changed, main_inputs, [w["stats_plot"]], api_name="attention_refresh",
             api_visibility="private", trigger_mode="always_last", show_progress="minimal")
    # The picker's info is written on page load and whenever the model changes: fit the widgets then.
    # Only after it: a second fit on the dropdown's own change raced this one and sent the old layer
    # against the new, smaller maximum ("Value 6 is greater than maximum value 2" in the browser).
    picker.info.change(_fit_handler(services), inputs=[picker.dropdown, layer, head, view_heads],
                       outputs=[layer, head, view_heads], api_visibility="private", show_progress="hidden")
    endpoint(w["ablate_button"].click, _ablate_handler(services), [picker.dropdown, text, pair, heads_text, w["top_k"]],
             [w["ablation_figure"], w["ablation_summary"]], api_name="ablate_heads", heavy=True)
    endpoint(w["add_head"].click, add_chosen, [heads_text, layer, head], [heads_text], api_name="attention_add_head",
             gpu=False, clear=False, api_visibility="private", show_progress="hidden")
    endpoint(w["export_button"].click, _export_handler(services), [picker.dropdown, text, pair, layer, head, length],
             [w["files"]], api_name="attention_export")
    endpoint(w["over_button"].click, _over_training_handler(services),
             [picker.dropdown, text, pair, layer, head, length, w["over_run"]],
             [w["over_note"], w["over_maps"], w["over_lines"]], api_name="attention_over_training",
             heavy=True)


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each example on ``loaded``, and the neuron view of the first (the engine's layer index 0,
    the tab's layer 1; head 0, query 1): the demo warm-up runs them."""
    calls: list[tuple[str, Callable[[], object]]] = [
        (f"attention {i}", lambda t=text, p=pair: attention(loaded, t, p or None))
        for i, (text, pair) in enumerate(EXAMPLES)]
    text, pair = EXAMPLES[0]
    calls.append(("neuron_view 0", lambda: neuron_view(loaded, text, pair or None, 0, 0, 1)))
    return calls
