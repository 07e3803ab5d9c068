"""The Embeddings tab's widgets, one function per part of the page: the inputs, the views of one input and
the *Over training* accordion. Each creates its widgets inside the current layout and returns them by name;
``explorer.embeddings.tab`` wires them."""
from __future__ import annotations

from typing import Any, Sequence

import gradio as gr

from engine.probes.representations.embeddings import COMPONENTS
from explorer.runs import run_picker as run_picker
from explorer.embeddings import canvas, plots as eplots
from explorer.services import Services

ALL_TOKENS = "all"
FIRST_WORD = "first"           # the token choice until you pick one: the text's first word (not [CLS])
MAX_LAYERS = 48                # the slider's range for API callers (a browser session narrows it to the model)
DEFAULT_OVER_TRAINING_POSITIONS = 64
OVER_TRAINING_POSITIONS = (8, 128)   # the positions slider's range
# The one layer rule (explorer.glossary.LAYER_RULE), as every layer field of the tab says it.
LAYER_NOTE = "0 = the embeddings' output, 1 to L = the encoder layers' outputs"
COMPONENT_CHOICES = [(eplots.COMPONENT_LABELS[c], c) for c in COMPONENTS]

EXAMPLES: list[list[str]] = [
    ["Who was Jim Henson?", "Jim Henson was a nice puppet"],
    ["The dog chased the other dog around the dog house.", ""],
    ["I went to the bank to deposit money.", "We sat on the river bank."],
    ["The cat sat on the mat.", ""],
]


def token_choices(tokens: Sequence[str]) -> list[tuple[str, str]]:
    """Dropdown (label, value) pairs: the first word, all tokens, then one per position."""
    return ([("First word of the text", FIRST_WORD), ("All tokens", ALL_TOKENS)]
            + [(f"{i}: {t}", str(i)) for i, t in enumerate(tokens)])


def inputs(num_layers: int) -> dict[str, Any]:
    """The text, pair, layer, component and token fields and the *Show embeddings* button."""
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=2, placeholder="Type a sentence…")
            pair = gr.Textbox("", label="Text pair (optional, segment B)", lines=2,
                              placeholder="A second sentence makes a pair: [CLS] A [SEP] B [SEP]")
        with gr.Column(scale=2, min_width=260):
            # The build-time range is wide so API calls on deeper models pass the slider's own bounds check;
            # in a browser it is narrowed to the picked model's 0..L (see the tab's fit_layers).
            layer = gr.Slider(0, max(num_layers, MAX_LAYERS), value=num_layers, step=1,
                              label=f"Layer for the contextual view ({LAYER_NOTE})")
            component = gr.Radio(COMPONENT_CHOICES, value="output", label="Component for the dimensions heatmap",
                                 elem_id="embeddings-component")   # the canvas view reads it (embeddings_view.js)
            token = gr.Dropdown(token_choices([]), value=FIRST_WORD, label="Nearest neighbours of",
                                allow_custom_value=True, interactive=True)
            button = gr.Button("Show embeddings", variant="primary")
    return {"text": text, "pair": pair, "layer": layer, "component": component, "token": token, "button": button}


def views(text: Any, pair: Any) -> dict[str, Any]:
    """The examples, the summary, the figures (the two maps are canvas views), the neighbours table and the
    result's state."""
    examples = gr.Examples(examples=EXAMPLES, inputs=[text, pair], label="Examples", cache_examples=False,
                           api_name="embeddings_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["embeddings-summary"])
    norms = gr.Plot(label="Component norms per token")
    heatmap = canvas.component("dimensions", "Hidden dimensions")          # drawn in the browser
    with gr.Row():
        position_sim = canvas.component("similarity", "Position similarity")
        position_pca = gr.Plot(label="Position PCA")
    with gr.Row():
        contextual_pca = gr.Plot(label="Contextual PCA")
        segment_diff = gr.Plot(label="Segment difference")
    table = gr.Dataframe(headers=eplots.NEIGHBOUR_COLUMNS,
                         label="Nearest vocabulary neighbours (cosine of input embeddings)",
                         interactive=False, wrap=False, max_height=420)
    state = gr.State(None)
    return {"examples": examples, "summary": summary, "norms": norms, "heatmap": heatmap,
            "position_similarity": position_sim, "position_pca": position_pca, "contextual_pca": contextual_pca,
            "segment_difference": segment_diff, "table": table, "state": state}


def over_training(services: Services) -> dict[str, Any]:
    """The *Over training* accordion: the run, the positions, the button, a message and the figure."""
    with gr.Accordion("Over training", open=False):
        gr.Markdown("The position-similarity matrix at up to six checkpoints of a run (by default the picked "
                    "checkpoint's run, else the newest): watch the diagonal band appear as position embeddings "
                    "are learned.")
        with gr.Row():
            over_run = run_picker.build(services)
            positions = gr.Slider(*OVER_TRAINING_POSITIONS, value=DEFAULT_OVER_TRAINING_POSITIONS, step=1,
                                  label="Positions")
            over_button = gr.Button("Show position similarity over training")
        over_message = gr.Markdown()
        over_plot = gr.Plot(label="Position similarity per checkpoint")
    return {"over_run": over_run, "positions": positions, "over_button": over_button, "over_message": over_message,
            "over_plot": over_plot}
