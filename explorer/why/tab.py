"""Why tab: which input tokens pushed a prediction up or down, for every head the model has."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from engine.probes.attribution.methods import DEFAULT_STEPS, MAX_STEPS
from engine.probes.inference import attribute
from explorer.endpoints import endpoint, wire_run
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.why.actions import (EXAMPLES, METHOD_CHOICES, SCORE_CHOICES, explain_prediction, form,
                                  form_updates, task_choices)

API_NAME = "attribute"
INTRO = f"""\
Pick a prediction and ask **why**: each input token gets an {gloss("attribution")}, a number saying how much it
pushed the model's score for that prediction **up (red)** or **down (blue)**. The score is the prediction's
{gloss("logit")} (its raw score before the softmax) or its probability (as a percentage, and the
attributions then in percentage points). *Integrated gradients* walks from a
baseline, where every word is `[PAD]` (`[CLS]`, `[SEP]` and `[MASK]` stay), to your input and adds up the
gradients on the way: the numbers add up to the score's change from the baseline, up to the
*convergence delta* shown (more steps, smaller delta). *Gradient × input* is one backward pass: quicker,
rougher, and it adds up to nothing in particular. Both come from [captum](https://captum.ai) on the word
embeddings; position and segment embeddings are left as they are.
The first example explains a guess the bundled model gets right (*states*); the France examples explain a
famous miss (*located* before *paris*: a small model trained on little compute has learnt few facts), and why
not *paris*.
"""


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Why tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    text_label, text_hint, pair_label, pair_hint, target_hint, which_label = form("fill_mask")
    with gr.Row():
        with gr.Column(scale=3):
            task = gr.Dropdown(choices=task_choices(), value="fill_mask", label="Prediction to explain")
            text = gr.Textbox(label=text_label, lines=2, placeholder=text_hint)
            pair = gr.Textbox("", label=pair_label, lines=2, placeholder=pair_hint)
        with gr.Column(scale=2, min_width=260):
            target = gr.Textbox("", label="Target (empty: the model's prediction)", placeholder=target_hint)
            which = gr.Number(0, precision=0, minimum=0, label=which_label)
            method = gr.Radio(METHOD_CHOICES, value="integrated_gradients", label="Method")
            score = gr.Radio(SCORE_CHOICES, value="logit", label="Explain the")
            steps = gr.Slider(2, MAX_STEPS, value=DEFAULT_STEPS, step=1, label="Steps (integrated gradients)")
            button = gr.Button("Explain", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[task, text, pair, target, which], label="Examples",
                           cache_examples=False, api_name=f"{API_NAME}_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["token-summary"])
    tokens = gr.HTML(label="The input, coloured by attribution")
    bars = gr.Plot(label="Top tokens")
    with gr.Accordion("Numbers as JSON", open=False):
        numbers = gr.JSON(label="attribution")

    def run(model_key: str, task: str, text: str, text_pair: str = "", target: str = "", which: float = 0,
            method: str = "integrated_gradients", score: str = "logit", steps: float = DEFAULT_STEPS,
            progress: gr.Progress = gr.Progress()) -> tuple[Any, ...]:
        """Which input tokens pushed one prediction up or down (captum attributions on the word embeddings).

        Args:
            model_key: the model picker's key ('default', 'checkpoint:<run>/<step-dir>', ...).
            task: the prediction: fill_mask, qa_start, qa_end, next_sentence, classify, tag or choose.
            text: the text with [MASK] (fill_mask), the question (qa_*), sentence A (next_sentence), the text
                (classify, tag) or the context (choose).
            text_pair: the optional pair (fill_mask, classify), the context (qa_*), sentence B (next_sentence) or
                the choices, one per line (choose).
            target: the token (fill_mask), label (next_sentence, classify) or tag (tag) to explain; empty for the
                model's prediction (next_sentence: IsNext).
            which: which [MASK], word or choice, 1 for the first; 0 for the default (the first [MASK], the first
                word not tagged O, the model's pick).
            method: integrated_gradients or gradient_x_input.
            score: logit or probability.
            steps: integration steps for integrated gradients (2 to 300).
        Returns:
            a summary (scores at input and baseline, convergence delta), the tokens coloured by attribution as
            HTML, a bar chart of the top tokens, and every number as JSON.
        """
        report = (lambda fraction: progress(fraction, desc="Integrating gradients…")) if progress else None
        return explain_prediction(services, model_key, task, text, text_pair, target, which, method, score, steps,
                                  report)

    wire_run(button, text, examples, run, [picker.dropdown, task, text, pair, target, which, method, score, steps],
             [summary, tokens, bars, numbers], api_name=API_NAME, show_progress="minimal", heavy=True)
    endpoint(task.change, form_updates, [task], [text, pair, target, which], api_name="attribute_form", gpu=False,
             clear=False, api_visibility="private", show_progress="hidden", queue=False)
    return {"task": task, "text": text, "pair": pair, "target": target, "which": which, "method": method,
            "score": score, "steps": steps, "button": button, "summary": summary, "tokens": tokens, "bars": bars,
            "numbers": numbers}


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """The default example's attribution, when ``loaded`` has a masked-LM head (the demo warm-up runs it; it
    also imports captum, ~1.5 s off the first click)."""
    if "mlm" not in loaded.heads:
        return []
    task, text = EXAMPLES[0][:2]
    return [("attribute 0", lambda: attribute(loaded, task, text))]
