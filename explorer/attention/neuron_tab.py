"""The Attention tab's *Neuron view* (bertviz's idea): for the tab's layer and head and a chosen query token,
the query vector, every key vector, their element-wise products, the scaled dot products and the softmax --
the numbers that make that token's row of the heatmap. The page draws them on a canvas from every token's query
and key vectors (``neuron_canvas``: float16, sent once per input and head); a click picks the query token there,
with no request. :func:`show_neuron_view` keeps the Plotly figures for Python callers."""
from __future__ import annotations

import re
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.probes.attention.maps import encode_input
from engine.probes.attention.neuron_view import NeuronInputs, NeuronView, neuron_inputs, neuron_view_of
from explorer.attention import neuron_canvas, neuron_plots
from explorer.attention.actions import effective_length, model_shape, read_inputs
from explorer.attention.canvas import input_id
from explorer.layer_numbers import head_index, shown_layer
from explorer.endpoints import endpoint
from explorer.formatting import sig
from explorer.forward_cache import cached
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import whole_number

API_NAME = "neuron_view"
TOP_KEYS = 3                 # the summary names this many keys with the largest weights
NOTE = """\
One row of the heatmap, number by number, for the layer and head chosen above. The layer turns each
token into a **query** *q* and a **key** *k* (each as long as the head size). The query token's score
for key *j* is the sum of **q ⊙ k<sub>j</sub>** (element by element) divided by √head size; the
**{softmax}** of these scores is the token's row of the heatmap: where it looks. Layers are numbered from 1
(layer 0 is the embeddings' output, which has no attention) and heads from 0. In the drawing, click a token
(or use the arrow keys) to make it the query, and hover any cell for its number.
""".format(softmax=gloss("softmax", "softmax"))
_LEADING_NUMBER = re.compile(r"^\s*(-?\d+)")


def parse_query(value: Any) -> int:
    """The query position from the dropdown or the API: an int, a float like 3.0, "3" or "3: cat" (0 when empty)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    found = _LEADING_NUMBER.match(value) if isinstance(value, str) else None
    return whole_number(found.group(1) if found else value, "The query token (0 = [CLS])", 0)


def summary_markdown(view: NeuronView) -> str:
    """The chosen row in words: the query, the head size and scale, and the keys it weighs most."""
    order = sorted(range(len(view.tokens)), key=lambda j: -float(view.weights[j]))[:TOP_KEYS]
    strongest = " · ".join(f"`{view.tokens[j]}` ({j}): weight {view.weights[j]:.3f}, score {sig(float(view.scores[j]))}"
                           for j in order)
    lines = [f"**Layer {shown_layer(view.layer)}, head {view.head}, query {view.query} `{view.tokens[view.query]}`** · head size "
             f"{view.head_size}, so each score is Σ(q ⊙ k) × {sig(view.scale)} (= 1/√{view.head_size}) · model: "
             f"{view.source}",
             f"It looks most at: {strongest}"]
    if view.masked.any():
        lines.append(f"{int(view.masked.sum())} padded keys get weight 0 (the attention mask).")
    if view.truncated:
        lines.append("⚠️ the input was truncated to the max length")
    return "\n\n".join(lines)


def _neuron_input(services: Services, model_key: str | None, text: str | None, text_pair: str | None, layer: Any,
                  head: Any, max_length: Any) -> tuple[NeuronInputs, int, int, str]:
    """(the input's queries and keys, the engine's layer index, the head, the views' ``id`` of the input), read
    from the forward cache (one forward per input)."""
    text, pair = read_inputs(text, text_pair)
    with services.probing():
        loaded = services.model(model_key)
        index, head = head_index(*model_shape(loaded), layer, head)
        length = effective_length(services, loaded, max_length)
        inputs = cached(services.forward_cache, loaded.model, ("neuron", text, pair, length),
                        lambda: neuron_inputs(loaded, text, pair, length))
    return inputs, index, head, input_id(loaded.model, text, pair, length)


def show_neuron_view(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                     layer: Any, head: Any, max_length: Any, query: Any) -> tuple[str, go.Figure, go.Figure]:
    """The summary, the vectors figure and the scores figure (Plotly) for one query token of one head: the
    neuron view for Python callers (the page draws :func:`show_neuron_canvas`'s value)."""
    position = parse_query(query)
    inputs, index, head, _ = _neuron_input(services, model_key, text, text_pair, layer, head, max_length)
    view = neuron_view_of(inputs, index, head, position)
    name = f"{view.query}: {view.tokens[view.query]}"
    vectors = neuron_plots.vectors_figure(view.tokens, view.query, view.query_vector, view.key_vectors, view.products,
                                          view.masked, title=f"Layer {shown_layer(index)}, head {head}: query {name}")
    scores = neuron_plots.scores_figure(view.tokens, view.query, view.scores, view.weights, view.masked)
    return summary_markdown(view), vectors, scores


def query_choices(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                  max_length: Any, current: Any) -> Any:
    """The query dropdown's choices for the tab's current tokens (``position: token``), keeping the current
    position when it still exists; unchanged when the text cannot be read (the main view says why)."""
    try:
        text, pair = read_inputs(text, text_pair)
        with services.probing():
            loaded = services.model(model_key)
            tokens = encode_input(loaded, text, pair, effective_length(services, loaded, max_length)).tokens
        position = parse_query(current)
    except Exception:  # noqa: BLE001 - the Attention view itself reports bad input
        return gr.skip()
    return gr.update(choices=[(f"{i}: {t}", i) for i, t in enumerate(tokens)],
                     value=position if 0 <= position < len(tokens) else 0)


def show_neuron_canvas(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                       layer: Any, head: Any, max_length: Any, query: Any) -> dict[str, Any]:
    """The neuron view's value (``neuron_canvas.value``) for one input, head and query token (checked), with
    the chosen row in words as ``summary``."""
    position = parse_query(query)
    inputs, index, head, view_id = _neuron_input(services, model_key, text, text_pair, layer, head, max_length)
    view = neuron_view_of(inputs, index, head, position)                # checks the query; the summary's numbers
    return neuron_canvas.value(inputs, index, head, view.query, view_id, summary=summary_markdown(view))


def fetch_neuron_canvas(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                        layer: Any, head: Any, max_length: Any, held: str | None) -> Any:
    """A layer or head the page lacks: that head's vectors alone when ``held`` (the ``id`` the page holds) is
    this input's, else the whole value (the text changed); the page keeps its query token (``query`` None)."""
    if not text or not str(text).strip():
        return gr.skip()
    inputs, index, head, view_id = _neuron_input(services, model_key, text, text_pair, layer, head, max_length)
    heads = [(index, head)] if held == view_id else None
    return neuron_canvas.value(inputs, index, head, None, view_id, heads=heads)


def build(services: Services, picker: ModelPicker, text: Any, pair: Any, layer: Any, head: Any,
          length: Any, follow_head: Any) -> dict[str, Any]:
    """The *Neuron view* accordion (inside the current layout), reading the tab's text, layer, head and length;
    ``follow_head`` (the heatmap's ``neuron`` event, fired in the browser when the neuron view lacks the vectors
    of the chosen layer and head) fetches them."""
    with gr.Accordion("Neuron view: the numbers behind one row of the heatmap", open=False):
        gr.Markdown(NOTE)
        with gr.Row():
            # Custom values: an API caller (a new session) names a position the build-time choices lack.
            # The view follows a pick here in the browser (elem_id), with no request.
            query = gr.Dropdown(choices=[("0: [CLS]", 0)], value=0, allow_custom_value=True, scale=3,
                                label="Query token (its row of the heatmap)", elem_id="neuron-query")
            button = gr.Button("Show the neuron view", scale=1, elem_id="neuron-show")   # the page's ask
        view = neuron_canvas.component("Query, keys, their element-wise products, the scores and their softmax "
                                       "(click a token to make it the query)")

    def run(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
            query: Any = 0) -> dict[str, Any]:
        """The numbers behind one row of one head's attention map (bertviz's neuron view), for the browser to draw.

        Args:
            model_key: the model picker's key ('default', 'checkpoint:<run>/<step-dir>', ...).
            text: the text (segment A).
            text_pair: optional second text (segment B); empty for none.
            layer: layer, from 1 (the first encoder layer; 0 is the embeddings' output, which has no attention).
            head: head, from 0.
            max_length: longest sequence in tokens, specials included.
            query: the query token's position (0 = [CLS]).
        Returns:
            a dict: `tokens`, `layer` (the engine's index: layer - 1), `head`, `query`, `head_size`, `scale`
            (1/√head_size), `summary` (the row in words), `heads` ([layer index, head] pairs) and `queries` /
            `keys`: arrays (len(heads), tokens, head_size) in float16, read with
            `explorer.views.browser_arrays.decode` (docs/design/browser-views.md).
        """
        return show_neuron_canvas(services, model_key, text, text_pair, layer, head, max_length, query)

    def fetch(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
              evt: gr.EventData) -> Any:
        held = (getattr(evt, "_data", None) or {}).get("id")
        return fetch_neuron_canvas(services, model_key, text, text_pair, layer, head, max_length, held)

    inputs = [picker.dropdown, text, pair, layer, head, length, query]
    endpoint(button.click, run, inputs, [view], api_name=API_NAME, show_progress="minimal")
    endpoint(follow_head, fetch, inputs[:-1], [view], api_name=f"{API_NAME}_refresh", api_visibility="private",
             trigger_mode="always_last", show_progress="minimal")

    def choices(model_key: str, text: str, text_pair: str, max_length: float, current: Any) -> Any:
        return query_choices(services, model_key, text, text_pair, max_length, current)

    def follow(event: Any) -> None:
        """After ``event`` (the tab's *Show attention*) succeeds, list its tokens as the query choices."""
        event.success(choices, inputs=[picker.dropdown, text, pair, length, query], outputs=[query],
                      api_visibility="private", show_progress="hidden", queue=False)

    return {"query": query, "button": button, "view": view, "follow": follow}
