"""The Attention tab's *Neuron view* (bertviz's idea): for the tab's layer and head and a chosen query token,
the query vector, every key vector, their element-wise products, the scaled dot products and the softmax --
the numbers that make that token's row of the heatmap."""
from __future__ import annotations

import re
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.probes.attention import encode_input
from engine.probes.neuron_view import NeuronView, neuron_inputs, neuron_view_of
from explorer.attention import neuron_plots
from explorer.attention.actions import effective_length, model_shape, read_inputs
from explorer.attention.layers import head_index, shown_layer
from explorer.endpoints import endpoint, handler
from explorer.formatting import sig
from explorer.forward_cache import cached
from explorer.glossary import gloss
from explorer.model_picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import whole_number

API_NAME = "neuron_view"
TOP_KEYS = 3                 # the summary names this many keys with the largest weights
NOTE = """\
One row of the heatmap, number by number, for the layer and head chosen above. The layer turns each
token into a **query** *q* and a **key** *k* (each as long as the head size). The query token's score
for key *j* is the sum of **q ⊙ k<sub>j</sub>** (element by element) divided by √head size; the
**{softmax}** of these scores is the token's row of the heatmap: where it looks. Layers are numbered from 1
(layer 0 is the embeddings' output, which has no attention) and heads from 0.
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


def show_neuron_view(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                     layer: Any, head: Any, max_length: Any, query: Any) -> tuple[str, go.Figure, go.Figure]:
    """The summary, the vectors figure and the scores figure for one query token of one head."""
    text, pair = read_inputs(text, text_pair)
    position = parse_query(query)
    with services.probing():
        loaded = services.model(model_key)
        index, head = head_index(*model_shape(loaded), layer, head)
        length = effective_length(services, loaded, max_length)
        inputs = cached(services.forward_cache, loaded.model, ("neuron", text, pair, length),
                        lambda: neuron_inputs(loaded, text, pair, length))     # one forward per input
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


def build(services: Services, picker: ModelPicker, text: Any, pair: Any, layer: Any, head: Any,
          length: Any, follow_head: Any) -> dict[str, Any]:
    """The *Neuron view* accordion (inside the current layout), reading the tab's text, layer, head and length;
    ``follow_head`` (the heatmap's ``neuron`` event, fired in the browser once the view is shown) redraws it
    for a new layer or head."""
    with gr.Accordion("Neuron view: the numbers behind one row of the heatmap", open=False):
        gr.Markdown(NOTE)
        with gr.Row():
            # Custom values: an API caller (a new session) names a position the build-time choices lack.
            query = gr.Dropdown(choices=[("0: [CLS]", 0)], value=0, allow_custom_value=True, scale=3,
                                label="Query token (its row of the heatmap)")
            button = gr.Button("Show the neuron view", scale=1)
        summary = gr.Markdown(elem_classes=["neuron-summary"])
        vectors = gr.Plot(label="Query, keys and their element-wise products (hidden dimensions across)")
        scores = gr.Plot(label="Scaled dot products and their softmax")

    def run(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
            query: Any = 0) -> tuple[Any, ...]:
        """The numbers behind one row of one head's attention map (bertviz's neuron view).

        Args:
            model_key: the model picker's key ('default', 'checkpoint:<run>/<step-dir>', ...).
            text: the text (segment A).
            text_pair: optional second text (segment B); empty for none.
            layer: layer, from 1 (the first encoder layer; 0 is the embeddings' output, which has no attention).
            head: head, from 0.
            max_length: longest sequence in tokens, specials included.
            query: the query token's position (0 = [CLS]).
        Returns:
            a summary, the query / key / product vectors as heatmaps, and the scaled dot products with their
            softmax as bars.
        """
        return show_neuron_view(services, model_key, text, text_pair, layer, head, max_length, query)

    run = handler(run, API_NAME)              # made once: the button and the redraw below both call it

    def refresh(model_key: str, text: str, text_pair: str, layer: float, head: float, max_length: float,
                query: Any, shown: str) -> tuple[Any, ...]:
        if not shown or not text or not str(text).strip():
            return gr.skip(), gr.skip(), gr.skip()          # nothing shown yet: stay closed and cheap
        return run(model_key, text, text_pair, layer, head, max_length, query)

    inputs = [picker.dropdown, text, pair, layer, head, length, query]
    outputs = [summary, vectors, scores]
    endpoint(button.click, run, inputs, outputs, api_name=API_NAME, show_progress="minimal")
    endpoint([query.input, follow_head], refresh, [*inputs, summary], outputs, gpu=False,
             api_name=f"{API_NAME}_refresh", api_visibility="private", trigger_mode="always_last",
             show_progress="minimal")

    def choices(model_key: str, text: str, text_pair: str, max_length: float, current: Any) -> Any:
        return query_choices(services, model_key, text, text_pair, max_length, current)

    def follow(event: Any) -> None:
        """After ``event`` (the tab's *Show attention*) succeeds, list its tokens as the query choices."""
        event.success(choices, inputs=[picker.dropdown, text, pair, length, query], outputs=[query],
                      api_visibility="private", show_progress="hidden", queue=False)

    return {"query": query, "button": button, "summary": summary, "vectors": vectors, "scores": scores,
            "follow": follow}
