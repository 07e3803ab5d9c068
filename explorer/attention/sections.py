"""The Attention tab's widgets, one function per part of the page: the inputs, the views of every head, and
the ablation, export and over-training accordions. Each creates its widgets inside the current layout and
returns them by name; ``explorer.attention.tab`` wires them."""
from __future__ import annotations

from typing import Any

import gradio as gr

from engine.probes.attention.head_stats import STAT_NAMES, STAT_TITLES
from explorer.runs import run_picker as run_picker
from explorer.views import canvas_view as canvas_view
from explorer.attention import canvas, joined_fetch, neuron_tab
from explorer.attention.actions import DEFAULT_LENGTH, DEFAULT_TOP_K, MAX_CHECKPOINTS, MIN_LENGTH
from explorer.layer_numbers import HEAD_LABEL, LAYER_LABEL
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services

MAX_LAYERS, MAX_HEADS = 48, 64  # build-time slider ranges, so API calls on bigger models pass their checks
STAT_CHOICES = [(STAT_TITLES[name], name) for name in STAT_NAMES]
SHARE_STATS = ("cls", "sep", "self", "prev", "next")    # shares of attention (percentages in the table)
# Short headers that read in full in a narrow column (the caption spells them out), and their widths.
TABLE_COLUMNS = ["layer", "head", "entropy", "[CLS]", "[SEP]", "self", "prev", "next", "distance"]
TABLE_WIDTHS = ["64px", "60px", "88px", "76px", "76px", "64px", "64px", "64px", "96px"]   # 652 px in all
TABLE_MIN_WIDTH = 680           # the table's column: narrower, it moves under the plot rather than cut a header
TABLE_CAPTION = ("Per head, means over the query tokens: **entropy** of its attention row in {nats}; the share of "
                 "attention sent to **[CLS]**, to **[SEP]**, to the token **self**, to the **prev**ious and the "
                 "**next** token; mean **distance** |i − j| in tokens. Layers from 1, heads from 0.")

EXAMPLES: list[list[str]] = [
    ["The cat sat on the mat because it was tired.", ""],
    ["Who was Jim Henson?", "Jim Henson was a nice puppet"],
    ["The trophy did not fit in the suitcase because it was too big.", ""],
    ["The man went to the [MASK] to buy a gallon of milk.", ""],
]

EXPORT_NOTE = """\
**Export** writes the heatmap of the chosen layer and head: **SVG** (drawn here, with token
labels and a colour bar), **PNG** (the cells only, one square per weight, the colours drawn on the heatmap;
for a PNG *with* labels use the heatmap's *PNG* button) and
**JSON** (`tokens`, `layer` from 1, `head` from 0, `attention` rows, `stats`).
"""
ABLATION_NOTE = ("Name heads as `layer:head` (layers from 1, heads from 0), e.g. `1:0, 2:3`, or `4:*` for a "
                 "whole layer. The input is scored with every head and again without those ({ablation}): each "
                 "token is masked in turn and the masked-LM loss of the true token compared, in {nats} (inputs "
                 "up to 128 tokens; on long ones 32 evenly spaced tokens); `[MASK]`s in the text show their top "
                 "fillers' probabilities (the {softmax} of the {logit}s, as percentages), and a text pair its "
                 "P(IsNext). Needs a model with a masked-LM head.").format(
    ablation=gloss("ablation"), nats=gloss("nats"), softmax=gloss("softmax"), logit=gloss("logit"))


def inputs(services: Services, layers: int, num_heads: int) -> dict[str, Any]:
    """The text, pair, layer, head and length fields and the *Show attention* button."""
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=2, placeholder="Type a sentence…")
            pair = gr.Textbox("", label="Text pair (optional, segment B)", lines=1,
                              placeholder="A second sentence makes a pair: [CLS] A [SEP] B [SEP]")
        with gr.Column(scale=2, min_width=240):
            # Wide build-time ranges let API callers use deeper models; a browser narrows them to the
            # picked model on page load and whenever the model changes (see the tab's ``fit``).
            # The ids let the canvas views (assets/attention_view.js) follow the sliders in the browser.
            layer = gr.Slider(1, max(layers, MAX_LAYERS), value=1, step=1, label=LAYER_LABEL, elem_id="attention-layer")
            head = gr.Slider(0, max(num_heads, MAX_HEADS) - 1, value=0, step=1, label=HEAD_LABEL,
                             elem_id="attention-head")
            length = gr.Slider(MIN_LENGTH, min(512, services.max_length), value=DEFAULT_LENGTH, step=1,
                               label="Max length (tokens, incl. specials)")
            button = gr.Button("Show attention", variant="primary")
    return {"text": text, "pair": pair, "layer": layer, "head": head, "length": length, "button": button}


def views(services: Services, picker: ModelPicker, fields: dict[str, Any], num_heads: int) -> dict[str, Any]:
    """The examples, the summary, the heatmap, head view, neuron view, model view and head statistics; the neuron
    view's events and the heatmap's ``both`` (``joined_fetch``) are wired here, where both views exist."""
    text, pair = fields["text"], fields["pair"]
    examples = gr.Examples(examples=EXAMPLES, inputs=[text, pair], label="Examples", cache_examples=False,
                           api_name="attention_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["attention-summary"])
    with gr.Row():
        heatmap = canvas.component("heatmap", "Heatmap of the chosen head")
        with gr.Column():
            # A dropdown that accepts custom values: API callers may name heads of a bigger model
            # than the one picked at build time (a CheckboxGroup would reject them).
            view_heads = gr.Dropdown(choices=[(str(h), h) for h in range(num_heads)], value=list(range(num_heads)),
                                     multiselect=True, allow_custom_value=True, label="Heads in the head view")
            head_view = canvas.component("head_view", "Head view (one colour per head; the chosen head drawn strongest)")
    neuron = neuron_tab.build(services, picker, text, pair, fields["layer"], fields["head"], fields["length"],
                              canvas_view.event(heatmap, "neuron"))        # the chosen head's row, in numbers
    joined_fetch.wire(services, picker, fields, heatmap, view_heads, neuron["view"])   # both lack a change: one request
    model_view = canvas.component("model_view", "Model view: every layer (rows) × head (columns)")
    statistic = gr.Dropdown(choices=STAT_CHOICES, value="entropy", label="Head statistic")
    with gr.Row():
        stats_plot = gr.Plot(label="Statistic per head")
        with gr.Column(min_width=TABLE_MIN_WIDTH):
            stats_frame = gr.Dataframe(headers=TABLE_COLUMNS, label="Head statistics (means over query tokens)",
                                       interactive=False, wrap=False, max_height=420, column_widths=TABLE_WIDTHS)
            gr.Markdown(TABLE_CAPTION.format(nats=gloss("nats")), elem_classes=["table-caption"])
    return {"examples": examples, "summary": summary, "heatmap": heatmap, "view_heads": view_heads,
            "head_view": head_view, "neuron": neuron, "model_view": model_view, "statistic": statistic,
            "stats_plot": stats_plot, "stats_frame": stats_frame}


def ablation() -> dict[str, Any]:
    """The *Ablate heads* accordion: the heads to remove, top-k, the button and the results."""
    with gr.Accordion("Ablate heads: remove heads and measure the loss", open=False):
        gr.Markdown(ABLATION_NOTE)
        with gr.Row():
            heads_text = gr.Textbox(label="Heads to remove (layer:head)", placeholder="1:0, 2:3", scale=3)
            add_head = gr.Button("Add the chosen layer:head", scale=1)
            top_k = gr.Slider(1, 20, value=DEFAULT_TOP_K, step=1, label="Top-k fillers", scale=1)
        ablate_button = gr.Button("Ablate", variant="primary", elem_classes=["main-action"])
        ablation_summary = gr.Markdown()
        ablation_figure = gr.Plot(label="Baseline vs ablated")
    return {"heads_text": heads_text, "add_head": add_head, "top_k": top_k, "ablate_button": ablate_button,
            "ablation_summary": ablation_summary, "ablation_figure": ablation_figure}


def export() -> dict[str, Any]:
    """The *Export* accordion: its note, button and files."""
    with gr.Accordion("Export the chosen head (PNG, SVG, JSON)", open=False):
        gr.Markdown(EXPORT_NOTE)
        export_button = gr.Button("Export")
        files = gr.File(label="Files", file_count="multiple", interactive=False)
    return {"export_button": export_button, "files": files}


def over_training(services: Services) -> dict[str, Any]:
    """The *Over training* accordion: the run, the button, a note and the two figures."""
    with gr.Accordion("Over training: the chosen head at each checkpoint", open=False):
        gr.Markdown(f"Up to {MAX_CHECKPOINTS} checkpoints of a run (by default the picked checkpoint's run, else "
                    "the newest), oldest first: watch a head find its pattern as training goes on.")
        with gr.Row():
            over_run = run_picker.build(services)
            over_button = gr.Button("Show over training")
        over_note = gr.Markdown()
        over_maps = gr.Plot(label="The head's map per checkpoint")
        over_lines = gr.Plot(label="The head's statistics over training")
    return {"over_run": over_run, "over_button": over_button, "over_note": over_note, "over_maps": over_maps,
            "over_lines": over_lines}
