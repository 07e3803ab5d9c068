"""Heads tab, *Replaced tokens*: which tokens ELECTRA's discriminator calls replaced, P(replaced) per token."""
from __future__ import annotations

import math
from typing import Any

import gradio as gr

from engine.probes.heads.replaced_tokens import HEAD, ReplacedTokensResult, replaced_tokens
from explorer.endpoints import wire_run
from explorer.formatting import code, percent, rounded
from explorer.glossary import gloss
from explorer.heads.common import model_with_head
from explorer.heads.replaced_html import replaced_html
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import require_text

API_NAME = "replaced_tokens"
OUTPUTS = ("summary", "strip", "results")     # the widgets an answer fills, in the handler's order
DEFAULT_THRESHOLD = 0.5
MAX_NAMED = 12                                # the verdict names at most this many flagged tokens
# "replace a word" pairs: the same sentence as written and with one word swapped (flagged by a real discriminator)
EXAMPLES: list[list[str]] = [
    ["The chef cooked the meal."],
    ["The chef ate the meal."],
    ["She drove her car to work this morning."],
    ["She drove her banana to work this morning."],
]
INTRO = f"""\
ELECTRA is pretrained as a pair: a small **generator** (a masked LM) puts its own guesses in for some of the
tokens, and the **discriminator** reads the result and says, for every token, whether it is the original or one
the generator put in. Its **replaced-token detection head** gives one {gloss("logit")} per token; a sigmoid turns
it into **P(replaced)**, each token on its own (the tokens' probabilities need not add up to anything). Tokens
above the threshold are outlined; the special tokens are shown but never counted. Try a sentence and the same
sentence with one word swapped (the examples come in such pairs) on an ELECTRA discriminator (transformers'
`ElectraForPreTraining`, e.g. loaded from the hub in *Load another model*).
"""


def threshold_value(value: Any) -> float:
    """The threshold as a float in [0, 1] ("0.3" too), or ``gr.Error`` saying what it must be."""
    number: float | None = None
    if not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = None
    if number is None or not math.isfinite(number):
        raise gr.Error(f"The threshold must be a number from 0 to 1, got {value!r}.", print_exception=False)
    if not 0.0 <= number <= 1.0:
        raise gr.Error(f"The threshold must be from 0 to 1 (a probability), got {value!r}.", print_exception=False)
    return number


def verdict(result: ReplacedTokensResult, threshold: float) -> str:
    """One line: how many of the text's tokens are over the threshold and which, else the most suspect one."""
    counted = [i for i, role in enumerate(result.roles) if role is None]
    flagged = result.replaced(threshold)
    over = f"P(replaced) over {percent(threshold)}"
    if not counted:
        return f"The text has no tokens of its own to judge · model: {result.source}"
    if flagged:
        named = ", ".join(code(result.tokens[i]) for i in flagged[:MAX_NAMED])
        more = f" and {len(flagged) - MAX_NAMED} more" if len(flagged) > MAX_NAMED else ""
        line = (f"The discriminator calls **{len(flagged)} of {len(counted)}** tokens replaced ({over}): "
                f"{named}{more}")
    else:
        top = max(counted, key=lambda i: result.probabilities[i])
        line = (f"The discriminator calls **none of the {len(counted)}** tokens replaced (none has {over}); the "
                f"most suspect is {code(result.tokens[top])} at {percent(result.probabilities[top])}")
    return f"{line} · model: {result.source}"


def tokens_json(result: ReplacedTokensResult, threshold: float) -> list[dict[str, Any]]:
    """Every token in order: its text, special-token role (None for the text's), P(replaced) and logit to 3
    significant digits, and whether it is called replaced (a text token over the threshold)."""
    flagged = set(result.replaced(threshold))
    return [{"index": i, "token": token, "role": role, "probability": rounded(p), "logit": rounded(logit),
             "replaced": i in flagged}
            for i, (token, role, p, logit) in enumerate(zip(result.tokens, result.roles, result.probabilities,
                                                            result.logits))]


def predict(services: Services, model_key: str | None, text: str | None,
            threshold: Any = DEFAULT_THRESHOLD) -> tuple[str, str, list[dict[str, Any]]]:
    """Validate, run ``replaced_tokens`` and build the outputs: verdict, coloured token strip, token JSON."""
    require_text(text, empty_message="Type a sentence, e.g. 'The chef ate the meal.'")
    cut = threshold_value(threshold)
    with services.probing():
        loaded = model_with_head(services, model_key, HEAD)
        result = replaced_tokens(loaded, text)
    strip = replaced_html(result.tokens, result.probabilities, result.roles, cut)
    return verdict(result, cut), strip, tokens_json(result, cut)


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The *Replaced tokens* section's widgets (inside the current layout) and events."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    status = gr.Markdown()
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=2, placeholder="The chef ate the meal.")
        with gr.Column(scale=1, min_width=200):
            threshold = gr.Slider(0.0, 1.0, value=DEFAULT_THRESHOLD, step=0.01, label="Threshold",
                                  info="a token is called replaced when its P(replaced) is above this")
            button = gr.Button("Detect", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[text], label="Examples (pairs: a word replaced)",
                           cache_examples=False, api_name=f"{API_NAME}_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["token-summary"])
    strip = gr.HTML(label="P(replaced) per token")
    with gr.Accordion("Every token as JSON: role, P(replaced), logit, replaced", open=False):
        results = gr.JSON(label="replaced-token output")

    def run(model_key: str, text: str, threshold: float = DEFAULT_THRESHOLD) -> tuple[Any, ...]:
        """Which tokens of a text ELECTRA's discriminator calls replaced (its replaced-token detection head).

        Args:
            model_key: the model (picker key); it needs a replaced-token detection head (an ELECTRA
                discriminator, transformers' ElectraForPreTraining).
            text: the text to judge.
            threshold: a token of the text is called replaced when its P(replaced) is above this (0 to 1).
        Returns:
            a one-line verdict (how many tokens are called replaced, and which), the tokens as HTML coloured
            by P(replaced) with those over the threshold outlined, and [{"index", "token", "role", "probability",
            "logit", "replaced"}] for every token in order (role: the special token's role, e.g. "cls", else None).
        """
        return predict(services, model_key, text, threshold)

    wire_run(button, text, examples, run, [picker.dropdown, text, threshold],
             [summary, strip, results], api_name=API_NAME, show_progress="minimal")
    return {"status": status, "text": text, "threshold": threshold, "button": button, "summary": summary,
            "strip": strip, "results": results}
