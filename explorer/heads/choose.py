"""Heads tab, *Choose*: a context and 2 to 5 choices → the multiple-choice head's probability for each choice."""
from __future__ import annotations

from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.probes.heads.choose import ChooseResult, choose
from explorer.endpoints import wire_run
from explorer.formatting import percent, rounded
from explorer.glossary import gloss
from explorer.heads import plots
from explorer.heads.common import model_with_head
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import require_text
from explorer.views.plot_names import named_for

HEAD = "multiple_choice"
API_NAME = "choose"
OUTPUTS = ("summary", "bars", "results")      # the widgets an answer fills, in the handler's order
MIN_CHOICES, MAX_CHOICES = 2, 5
EXAMPLES: list[list[str]] = [
    ["She put the kettle on the stove.", "Soon it began to whistle.\nIt flew out of the window.\nThe stove sang a song."],
    ["The man picked up his guitar.",
     "He began to play a song.\nHe ate it for lunch.\nHe drove it to work.\nHe planted it in the garden."],
    ["It started to rain heavily.", "We opened our umbrellas.\nWe put on sunglasses to stay dry."],
]
INTRO = f"""\
The **multiple-choice head** reads each choice together with the context, as
`[CLS] context [SEP] choice [SEP]`, and gives each row one score (a {gloss("logit")}) from its pooled `[CLS]` vector;
a softmax **over the choices** turns the scores into probabilities (as `BertForMultipleChoice`,
trained on SWAG-style data: a context and its possible endings). Write 2 to 5 choices, one per line.
"""


def parse_choices(text: str | None) -> list[str]:
    """The non-blank lines of ``text`` (stripped), or ``gr.Error`` unless there are 2 to 5."""
    choices = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not MIN_CHOICES <= len(choices) <= MAX_CHOICES:
        raise gr.Error(f"Give {MIN_CHOICES} to {MAX_CHOICES} choices, one per line; got {len(choices)}.",
                       print_exception=False)
    return choices


def summary_markdown(result: ChooseResult) -> str:
    """The chosen choice with its probability, the number of choices and the model."""
    best = result.best
    return (f"**Choice {best + 1}**: {plots.short(result.choices[best])} · {percent(result.probabilities[best])} "
            f"(softmax over {len(result.choices)} choices) · model: {result.source}")


def results_json(result: ChooseResult) -> list[dict[str, Any]]:
    """One ``{"index", "choice", "score", "logit"}`` per choice, in order, numbers to 3 significant digits."""
    return [{**row, "score": rounded(row["score"]), "logit": rounded(row["logit"])} for row in result.as_dicts()]


def predict(services: Services, model_key: str | None, context: str | None,
            choices: str | None) -> tuple[str, go.Figure, list[dict[str, Any]]]:
    """Validate, run ``choose`` and build the outputs: summary, choice bars, the scores as JSON."""
    require_text(context, "context", empty_message="Type a context: the sentence the choices continue.")
    require_text(choices, "choices text", empty_message=f"Type {MIN_CHOICES} to {MAX_CHOICES} choices, one per line.")
    options = parse_choices(choices)
    with services.probing():
        loaded = model_with_head(services, model_key, HEAD)
        result = choose(loaded, context, options)
    labels = [f"{i}. {choice}" for i, choice in enumerate(result.choices, start=1)]
    bars = plots.probability_bars(labels, result.probabilities, best=result.best, title="Choice probabilities")
    bars = named_for(bars, loaded.source, context, "Choice probabilities", "; ".join(result.choices))
    return summary_markdown(result), bars, results_json(result)


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The *Choose* section's widgets (inside the current layout) and events."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    status = gr.Markdown()
    with gr.Row():
        with gr.Column(scale=3):
            context = gr.Textbox(label="Context", lines=2, placeholder="She put the kettle on the stove.")
            choices = gr.Textbox(label=f"Choices ({MIN_CHOICES} to {MAX_CHOICES}, one per line)", lines=4,
                                 placeholder="Soon it began to whistle.\nIt flew out of the window.")
        with gr.Column(scale=1, min_width=200):
            button = gr.Button("Choose", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[context, choices], label="Examples", cache_examples=False,
                           api_name=f"{API_NAME}_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["token-summary"])
    bars = gr.Plot(label="Choice probabilities")
    with gr.Accordion("Scores as JSON", open=False):
        results = gr.JSON(label="multiple-choice output")

    def run(model_key: str, context: str, choices: str) -> tuple[Any, ...]:
        """Pick the choice that best continues a context, with the multiple-choice head.

        Args:
            model_key: the model (picker key, e.g. a fine-tuned checkpoint); it needs a multiple-choice head.
            context: the sentence the choices continue.
            choices: 2 to 5 choices, one per line.
        Returns:
            a summary with the best choice, the choice probability bars (softmax over the choices), and
            [{"index", "choice", "score", "logit"}] per choice in the order given.
        """
        return predict(services, model_key, context, choices)

    wire_run(button, context, examples, run, [picker.dropdown, context, choices],
             [summary, bars, results], api_name=API_NAME, show_progress="minimal")
    return {"status": status, "context": context, "choices": choices, "button": button, "summary": summary,
            "bars": bars, "results": results}
