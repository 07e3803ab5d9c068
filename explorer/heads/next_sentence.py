"""Heads tab, *Next sentence*: does sentence B follow sentence A? P(IsNext) from the NSP head, and where [CLS] looks."""
from __future__ import annotations

from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.probes.heads.next_sentence import NextSentenceResult, next_sentence
from explorer.endpoints import wire_run
from explorer.formatting import percent, rounded
from explorer.glossary import gloss
from explorer.heads import plots
from explorer.heads.common import model_with_head
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import require_text
from explorer.views.plot_names import named_for

HEAD = "nsp"
API_NAME = "next_sentence"
OUTPUTS = ("summary", "bars", "attention", "results")    # the widgets an answer fills, in the handler's order
EXAMPLES: list[list[str]] = [
    ["The cat sat on the mat.", "Soon it was fast asleep in the warm sun."],
    ["The cat sat on the mat.", "The treaty was signed in 1648 by the two kingdoms."],
    ["He scored twice in the final.", "His team won the cup for the first time."],
    ["He scored twice in the final.", "The recipe needs two cups of flour."],
]
INTRO = f"""\
In pretraining, half of the sentence pairs are real neighbours from one document and half are
a random sentence from another document; the **next-sentence ({gloss("NSP")}) head** reads the pooled
`[CLS]` vector and says which: *IsNext* or *NotNext*. The heatmap shows where `[CLS]` looks in
every layer (its attention row, averaged over the heads); the last layer's `[CLS]` state is what
the {gloss("pooler")} and the head read. Segment B is marked in orange under the tokens.
"""


def verdict(result: NextSentenceResult) -> str:
    """One line: P(IsNext) and what the model thinks, in words."""
    p = result.is_next
    if result.is_order:             # ALBERT: were the two segments swapped?
        thinks = "comes after A, in order" if p >= 0.5 else "was swapped with A"
        return (f"**P(InOrder) = {percent(p)}** (ALBERT's sentence-order head): the model thinks B {thinks}. "
                f"{len(result.tokens)} tokens · model: {result.source}")
    thinks = "follows A" if p >= 0.5 else "does not follow A (a random sentence)"
    return (f"**P(IsNext) = {percent(p)}**: the model thinks B {thinks}. "
            f"{len(result.tokens)} tokens · model: {result.source}")


def pipeline_json(result: NextSentenceResult) -> list[dict[str, Any]]:
    """The text-classification pipeline's shape (every label, best first), scores to 3 significant digits."""
    return [{**row, "score": rounded(row["score"])} for row in result.to_pipeline()]


def predict(services: Services, model_key: str | None, sentence_a: str | None,
            sentence_b: str | None) -> tuple[str, go.Figure, go.Figure, list[dict[str, Any]]]:
    """Validate, run ``next_sentence`` and build the outputs: verdict, bars, [CLS] attention, JSON."""
    require_text(sentence_a, "sentence A", empty_message="Type sentence A (the first sentence).")
    require_text(sentence_b, "sentence B", empty_message="Type sentence B (the sentence that may follow A).")
    with services.probing():
        loaded = model_with_head(services, model_key, HEAD)
        result = next_sentence(loaded, sentence_a, sentence_b)
    bars = plots.probability_bars(list(result.labels), result.probabilities,
                                  title="Are A and B in order?" if result.is_order else "Does B follow A?")
    attention = plots.cls_attention_figure(result.tokens, result.token_type_ids, result.cls_attention,
                                           title="Attention from [CLS], averaged over heads")
    bars = named_for(bars, loaded.source, sentence_a, "IsNext NotNext", sentence_b)
    attention = named_for(attention, loaded.source, sentence_a, "Where CLS looks", sentence_b)
    return verdict(result), bars, attention, pipeline_json(result)


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The *Next sentence* section's widgets (inside the current layout) and events."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    status = gr.Markdown()
    with gr.Row():
        with gr.Column(scale=3):
            sentence_a = gr.Textbox(label="Sentence A", lines=2, placeholder="The cat sat on the mat.")
            sentence_b = gr.Textbox(label="Sentence B", lines=2, placeholder="Soon it was fast asleep.")
        with gr.Column(scale=1, min_width=200):
            button = gr.Button("Predict", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[sentence_a, sentence_b], label="Examples", cache_examples=False,
                           api_name=f"{API_NAME}_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["token-summary"])
    with gr.Row(equal_height=False):
        bars = gr.Plot(label="IsNext / NotNext")
        attention = gr.Plot(label="Where [CLS] looks")
    with gr.Accordion("Scores as JSON (the text-classification pipeline's shape)", open=False):
        results = gr.JSON(label="next-sentence output")

    def run(model_key: str, sentence_a: str, sentence_b: str) -> tuple[Any, ...]:
        """Does sentence B follow sentence A? The next-sentence (NSP) head's answer.

        Args:
            model_key: the model (picker key, e.g. "default"); it needs a next-sentence head.
            sentence_a: the first sentence.
            sentence_b: the sentence that may follow it.
        Returns:
            a one-line verdict with P(IsNext), the IsNext/NotNext bars, the attention from [CLS] per layer
            (averaged over heads), and [{"label": "IsNext" | "NotNext", "score"}] best first.
        """
        return predict(services, model_key, sentence_a, sentence_b)

    wire_run(button, sentence_b, examples, run, [picker.dropdown, sentence_a, sentence_b],
             [summary, bars, attention, results], api_name=API_NAME, show_progress="minimal")
    return {"status": status, "sentence_a": sentence_a, "sentence_b": sentence_b, "button": button,
            "summary": summary, "bars": bars, "attention": attention, "results": results}
