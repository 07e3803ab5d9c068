"""Heads tab, *Classify*: the sequence-classification head's label probabilities for a text (or a pair)."""
from __future__ import annotations

from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.probes.heads.classify import ClassifyResult, classify_details
from explorer.endpoints import wire_run
from explorer.formatting import percent, rounded
from explorer.glossary import gloss
from explorer.heads import plots
from explorer.heads.common import model_with_head
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import check_length, require_text
from explorer.views.plot_names import named_for

HEAD = "classifier"
API_NAME = "classify"
OUTPUTS = ("summary", "bars", "results")      # the widgets an answer fills, in the handler's order
EXAMPLES: list[list[str]] = [            # the style of assets/examples/sentiment.csv (positive / negative)
    ["I loved this film from start to finish.", ""],
    ["The service was slow and the soup was cold.", ""],
    ["What a wonderful day at the beach.", ""],
    ["The plot made no sense and I nearly fell asleep.", ""],
]
INTRO = f"""\
The **sequence-classification head** reads the {gloss("pooler", "pooled")} `[CLS]` vector and gives
one score (a {gloss("logit")}) per label (the label names come from the model's `config.json`, `id2label`); a softmax turns them
into probabilities (a sigmoid when there is a single label). A second text makes it a
sentence-pair task (`[CLS] A [SEP] B [SEP]`), as in entailment. Fine-tune a model on the bundled
sentiment example (`assets/examples/sentiment.csv`) in the Fine-tune tab to try the examples.
"""


def summary_markdown(result: ClassifyResult) -> str:
    """The best label and its probability, the score function, the input size and the model."""
    best = result.best
    what = "sigmoid of the one logit" if result.function == "sigmoid" else f"softmax over {len(result.labels)} labels"
    return (f"**{result.labels[best]}** {percent(result.scores[best])} · {what} · {len(result.tokens)} tokens"
            f"{' (a text pair)' if result.text_pair else ''} · model: {result.source}")


def pipeline_json(result: ClassifyResult) -> list[dict[str, Any]]:
    """The text-classification pipeline's output (``top_k=None``: every label, best first), 3 significant digits."""
    return [{**row, "score": rounded(row["score"])} for row in result.to_pipeline()]


def predict(services: Services, model_key: str | None, text: str | None,
            text_pair: str | None = "") -> tuple[str, go.Figure, list[dict[str, Any]]]:
    """Validate, run ``classify_details`` and build the outputs: summary, label bars, pipeline JSON."""
    require_text(text, empty_message="Type a text to classify, e.g. 'I loved this film.'")
    if text_pair:
        check_length(text_pair, "second text")
    with services.probing():
        loaded = model_with_head(services, model_key, HEAD)
        result = classify_details(loaded, text, text_pair or None)
    bars = plots.probability_bars(result.labels, result.scores, best=result.best, title="Label probabilities")
    bars = named_for(bars, loaded.source, text, "Label probabilities", text_pair)
    return summary_markdown(result), bars, pipeline_json(result)


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The *Classify* section's widgets (inside the current layout) and events."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    status = gr.Markdown()
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=2, placeholder="I loved this film from start to finish.")
            text_pair = gr.Textbox("", label="Second text (optional, for sentence-pair tasks)", lines=1)
        with gr.Column(scale=1, min_width=200):
            button = gr.Button("Classify", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[text, text_pair], label="Examples", cache_examples=False,
                           api_name=f"{API_NAME}_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["token-summary"])
    bars = gr.Plot(label="Label probabilities")
    with gr.Accordion("Scores as JSON (the text-classification pipeline's format, top_k=None)", open=False):
        results = gr.JSON(label="text-classification output")

    def run(model_key: str, text: str, text_pair: str = "") -> tuple[Any, ...]:
        """Classify a text (or a text pair) with the sequence-classification head.

        Args:
            model_key: the model (picker key, e.g. a fine-tuned checkpoint); it needs a sequence-classification head.
            text: the text to classify.
            text_pair: an optional second text, for sentence-pair tasks ("" for none).
        Returns:
            a summary with the best label, the label probability bars, and [{"label", "score"}] for every
            label, best first (the transformers text-classification pipeline with top_k=None).
        """
        return predict(services, model_key, text, text_pair)

    wire_run(button, text, examples, run, [picker.dropdown, text, text_pair],
             [summary, bars, results], api_name=API_NAME, show_progress="minimal")
    return {"status": status, "text": text, "text_pair": text_pair, "button": button, "summary": summary,
            "bars": bars, "results": results}
