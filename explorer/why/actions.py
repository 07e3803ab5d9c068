"""What the Why tab's *Explain* does: check the form, run the attribution, build the outputs.

No widgets here: plain arguments in, Markdown / HTML / a figure / a dict out; bad input raises
``gr.Error`` (or ``ValueError``, which ``friendly_errors`` turns into a message).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.model.head_specs import HEADS, Form, attribution_targets
from engine.probes.attribution.methods import DEFAULT_STEPS, MAX_STEPS, METHODS, SCORES, Attribution, target_spec
from engine.probes.attribution.targets import NoSuchIndex
from engine.probes.inference import attribute
from explorer.formatting import percent, plain_markdown
from explorer.forward_cache import cached
from explorer.models.description import missing_head_message, specs_of
from explorer.services import Services
from explorer.ui_errors import check_length, require_text, whole_number
from explorer.views.plot_names import named_for
from explorer.why import plots
from explorer.why.numbers import decimal, shown
from explorer.why.token_html import attribution_html

METHOD_CHOICES = [("Integrated gradients", "integrated_gradients"), ("Gradient × input", "gradient_x_input")]
SCORE_CHOICES = [("logit", "logit"), ("probability", "probability")]
LARGE_DELTA = 0.01          # a delta over 1% of the score's change is flagged



def task_choices() -> list[tuple[str, str]]:
    """(label, name) of every prediction the dropdown offers: the registered heads' attribution targets."""
    return [(spec.choice, name) for name, (_, spec) in attribution_targets().items()]


def form(task: str) -> Form:
    """The form of ``task`` (text label, text placeholder, pair label, pair placeholder, target placeholder, which
    label), as its head declares it."""
    return attribution_targets()[task][1].form


def needs_pair(task: str) -> str | None:
    """What the second text of ``task`` is when it is required ("context"), else None."""
    return attribution_targets()[task][1].needs_pair


EXAMPLES: list[list[Any]] = [
    ["fill_mask", "The United [MASK] of America.", "", "", 0],    # first: the model's top guess is right (states)
    ["fill_mask", "The capital of France is [MASK].", "", "", 0],  # a miss (located): why, then why not paris
    ["fill_mask", "The capital of France is [MASK].", "", "paris", 0],
    ["qa_start", "What is the capital of France?", "Paris is the capital and largest city of France.", "", 0],
    ["next_sentence", "The cat sat on the mat.", "Soon it was fast asleep in the warm sun.", "", 0],
    ["classify", "A wonderful, moving film.", "", "", 0],
    ["tag", "Walter lives in Paris.", "", "", 0],
    ["choose", "The cat sat on the mat.", "It fell asleep in the sun.\nIt sang an aria at the opera.", "", 0],
]


def form_updates(task: str | None) -> tuple[Any, ...]:
    """Labels and placeholders of the text, pair, target and which fields for ``task``."""
    known = task if task in attribution_targets() else "fill_mask"
    text, text_hint, pair, pair_hint, target_hint, which = form(known)
    return (gr.update(label=text, placeholder=text_hint), gr.update(label=pair, placeholder=pair_hint),
            gr.update(placeholder=target_hint), gr.update(label=which))


def check_form(task: Any, text: Any, text_pair: Any, target: Any, which: Any, method: Any, score: Any,
               steps: Any) -> tuple[str, str, str | None, str | None, int | None, str, str, int]:
    """The form's values checked and converted (``which`` 1-based -> 0-based, 0 -> the default), or ``gr.Error``."""
    task = task or "fill_mask"
    if task not in attribution_targets():
        raise gr.Error(f"Unknown prediction {task!r}; choose one of {', '.join(attribution_targets())}.",
                       print_exception=False)
    text = require_text(text, form(task)[0].lower(), empty_message=f"Type the {form(task)[0].lower()}.")
    pair = text_pair if isinstance(text_pair, str) and text_pair.strip() else None
    if needs_pair(task) is not None and pair is None:
        raise gr.Error(f"Type the {needs_pair(task)}.", print_exception=False)
    if pair is not None:
        check_length(pair, needs_pair(task) or "text pair")
    target = target.strip() if isinstance(target, str) and target.strip() else None
    if target is not None:
        check_length(target, "target")
    method, score = method or "integrated_gradients", score or "logit"
    if method not in METHODS:
        raise gr.Error(f"Unknown method {method!r}; choose integrated_gradients or gradient_x_input.",
                       print_exception=False)
    if score not in SCORES:
        raise gr.Error(f"Unknown score {score!r}; choose logit or probability.", print_exception=False)
    return task, text, pair, target, _which(which), method, score, _steps(steps)


def _which(which: Any) -> int | None:
    """The form's 1-based 'Which' as a 0-based index; None for the default (empty or 0)."""
    if which is None or which == "":
        return None
    number = whole_number(which, "'Which' (1 = the first, 0 = the default)", 0)
    return number - 1 if number >= 1 else None


def which_message(missing: NoSuchIndex) -> str:
    """The engine's 0-based "index 98 does not exist" in the form's own numbering (1 = the first, 0 = the default)."""
    what, count = missing.what, missing.count
    has = f"{count} {what}{'' if count == 1 else 's'}"
    numbers = "1" if count == 1 else f"1 to {count}"
    return (f"There is no {what} {missing.index + 1}: the input has {has}, so 'Which' must be {numbers} "
            f"(counting from 1), or 0 for the default.")


def _steps(steps: Any) -> int:
    """The integration steps, 2 to ``MAX_STEPS`` (``DEFAULT_STEPS`` when None)."""
    return whole_number(DEFAULT_STEPS if steps is None else steps, "Steps", 2, MAX_STEPS)


def shown_score(value: float | None, score: str) -> str:
    """A score as the UI prints it: a probability as a percentage, a logit as a plain decimal (no exponent)."""
    if value is None:
        return "–"
    return percent(value) if score == "probability" else decimal(value)


def summary_markdown(result: Attribution) -> str:
    """What was explained, the scores, and (integrated gradients) how well the numbers add up. Every number is
    a percentage (a probability, or a change of one) or a plain decimal (a logit): never an exponent."""
    what = "probability" if result.score == "probability" else "logit"
    points = result.score == "probability"
    lines = [f"**Why {plain_markdown(result.target)}?** Explaining its **{what}** on {len(result.tokens)} tokens · "
             f"the model predicts {plain_markdown(result.prediction)} · model: {result.source}"]
    at_input = shown_score(result.target_score, result.score)
    if result.method == "integrated_gradients":
        difference = result.target_score - result.baseline_score
        at_baseline = shown_score(result.baseline_score, result.score)
        lines.append(f"{what.capitalize()} **{at_input}** at the input, **{at_baseline}** at the baseline "
                     f"({plain_markdown(result.baseline)}). The attributions add up to **{shown(result.total, points)}**; the "
                     f"difference is {shown(difference, points)}, so captum's convergence delta is "
                     f"**{shown(result.convergence_delta, points)}** with **{result.n_steps} steps** of integrated "
                     "gradients (Gauss-Legendre).")
        if abs(result.convergence_delta) > LARGE_DELTA * max(abs(difference), 1e-12):
            lines.append("⚠️ The delta is more than 1% of the difference: raise the steps for numbers that add up.")
    else:
        lines.append(f"{what.capitalize()} **{at_input}** at the input. Gradient × input: each token's gradient times "
                     "its word embedding, one backward pass. No baseline, so the numbers need not add up to the score.")
    lines += [f"ℹ️ {warning}" for warning in result.warnings]
    return "\n\n".join(lines)


def explain_prediction(services: Services, model_key: str | None, task: Any, text: Any, text_pair: Any = "",
                       target: Any = "", which: Any = 0, method: Any = "integrated_gradients", score: Any = "logit",
                       steps: Any = DEFAULT_STEPS, progress: Callable[[float], None] | None = None
                       ) -> tuple[str, str, go.Figure, dict[str, Any]]:
    """Check the form, explain the prediction, and return the summary, coloured tokens, top-token bars and JSON.
    The attribution is kept per visitor in the forward cache under every setting it depends on (method, score,
    target, which, steps: each is another computation), so only the very same request reads it back."""
    task, text, pair, target, which, method, score, steps = check_form(task, text, text_pair, target, which, method,
                                                                       score, steps)
    with services.probing():
        loaded = services.model(model_key)
        head = target_spec(task)[0]
        if head not in loaded.heads:
            raise gr.Error(_missing_head(loaded, head), print_exception=False)
        try:
            result = cached(services.forward_cache, loaded.model,          # the same request again runs no model
                            ("attribution", task, text, pair, target, which, method, score, steps),
                            lambda: attribute(loaded, task, text, pair, target=target, which=which, method=method,
                                              n_steps=steps, score=score, progress=progress))
        except NoSuchIndex as missing:
            raise gr.Error(which_message(missing), print_exception=False) from None
    title = "Tokens that pushed it most" + ("<br>(together: the change from the baseline)"   # two short lines
                                            if method == "integrated_gradients" else "")
    figure = plots.top_tokens_figure(result.tokens, result.attributions, title=title,
                                     x_title=f"attribution to the {score}", percent_points=score == "probability")
    figure = named_for(figure, loaded.source, text, f"Top tokens {method}", pair)
    return (summary_markdown(result), attribution_html(result.tokens, result.attributions, result.target_position,
                                                       percent_points=score == "probability"),
            figure, result.as_dict())


def _missing_head(loaded: Any, head: str) -> str:
    if HEADS[head].how_to_get is not None:
        return missing_head_message(loaded, head)
    has = ", ".join(specs_of(loaded)[h].title for h in loaded.heads) or "none (encoder only)"
    return (f"The picked model ({loaded.source}) has no {HEADS[head].title} head (its heads: {has}), so it cannot "
            "make this prediction; pick another prediction, or a model with that head in the model picker above.")
