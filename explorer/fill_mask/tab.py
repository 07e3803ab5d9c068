"""Fill-mask tab: the model's top-k guesses for every [MASK], and how they change over training."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from engine import cancellation
from engine.probes import inference
from engine.model.loaded_model import LoadedModel
from engine.probes.heads.fill_mask import FillMaskResult
from explorer.formatting import percent
from explorer.glossary import gloss
from explorer.models.choices import ModelChoice, evenly_spaced
from explorer.fill_mask import kept, plots as fill_mask_plots
from explorer.fill_mask.results import highlighted_fill, joint_markdown, summary_markdown
from explorer.runs import run_picker as run_picker
from explorer.endpoints import endpoint, wire_run
from explorer.models.picker import ModelPicker
from explorer.runs.run_picker import run_note
from explorer.services import Services
from explorer.ui_errors import check_length, require_text, whole_number
from explorer.views.plot_names import named_for

MAX_TOP_K = kept.MAX_TOP_K      # 50; every Top-k and targets are ranked from the logits kept per text
DEFAULT_TOP_K = 5
MAX_MASKS = 20
MAX_CHECKPOINTS = 6          # checkpoints probed over training (evenly spaced, first and last included)
EMPTY_MESSAGE = "Type a sentence with a [MASK] token, e.g. 'Nice to [MASK] you.'"
# Other ways people write a mask; each becomes the model's own mask token.
_MASK_SPELLINGS = re.compile(r"\[mask\]|<mask>", re.IGNORECASE)
PER_MASK_LABEL = "Top guess at each mask (each predicted on its own, with the other masks still hidden)"
ZOOM_LABEL = "Zoom: each chart to its own values (bars of different masks then no longer compare)"

EXAMPLES: list[list[Any]] = [
    ["The United [MASK] of America.", ""],                  # first: ones the default model gets right (INTRO)
    ["She opened the [MASK] and walked in.", ""],
    ["I drank a glass of [MASK].", "water, wine, stone, paper"],
    ["Paris is the [MASK] of [MASK].", ""],                   # then the ones it misses (INTRO)
    ["The capital of France is [MASK].", ""],
    ["Nice to [MASK] you.", ""],
]

INTRO = f"""\
In pretraining, 15% of the tokens are hidden (most become {gloss("[MASK]", "[MASK]")}) and the model learns to
predict them from the words on **both** sides: that is masked language modelling. Put one or
more `[MASK]` tokens in a sentence to see the model's top guesses and their {gloss("probability", "probabilities")}
(as percentages, every bar on one scale from 0% unless you tick *Zoom*),
or give target words to score only those. Over training the guesses improve: first the
right *kind* of word (syntax), later the right facts — compare checkpoints below.
With several masks, each mask's guesses are made on its own, the other masks still hidden (as the
`transformers` pipeline does); **Filled together** fills them one at a time instead, the surest first,
each step reading the words already filled.
The first examples are ones the small bundled model gets right (*states*, *door*, *water*); the last ones it
misses: filled together, two masks give *paris is the city of paris*, and famous phrases lose (*located* before
*paris*, *help* before *meet*). Trained for hours on 2 CPU cores and minutes on one GPU, over far less text than
bert-base, it has the grammar but few facts and set phrases.
"""

TABLE_BASE = ["mask", "token"]


def parse_targets(text: str | None) -> list[str] | None:
    """Comma-separated target words -> a list (None when there are none)."""
    if text is None:
        return None
    words = [w.strip() for w in text.split(",")]
    words = [w for w in words if w]
    return words or None


def mask_token_of(loaded: LoadedModel) -> str:
    """The model tokenizer's mask token text (e.g. ``[MASK]``); a clear error when it has none."""
    tokenizer = loaded.require_tokenizer()
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise gr.Error(f"This model's tokenizer ({loaded.source}) has no mask token; fill-mask needs one.",
                       print_exception=False)
    return tokenizer.id_to_token(mask_id)


def prepare_text(text: str | None, mask_token: str) -> str:
    """Validate the text and write every ``[mask]``/``<mask>`` spelling as ``mask_token``."""
    text = require_text(text, empty_message=EMPTY_MESSAGE)
    text = _MASK_SPELLINGS.sub(lambda _: mask_token, text)
    count = text.count(mask_token)
    if count == 0:
        raise gr.Error(f"There is no {mask_token} in the text: put {mask_token} where a word should be "
                       f"predicted, e.g. 'Nice to {mask_token} you.'", print_exception=False)
    if count > MAX_MASKS:
        raise gr.Error(f"The text has {count} {mask_token} tokens; at most {MAX_MASKS} are allowed at once.",
                       print_exception=False)
    return text


def check_top_k(value: float | int | None, maximum: int = MAX_TOP_K) -> int:
    """``value`` as an int in 1..maximum (``DEFAULT_TOP_K`` for None), else ``gr.Error``."""
    return DEFAULT_TOP_K if value is None else whole_number(value, "Top-k", 1, maximum)


def _prepare(services: Services, model_key: str | None, text: str | None, top_k: Any,
             targets: str | None) -> tuple[LoadedModel, str, int, list[str] | None]:
    k = check_top_k(top_k)
    if targets:
        check_length(targets, "targets")
    loaded = services.model(model_key)
    loaded.require_head("mlm")
    return loaded, prepare_text(text, mask_token_of(loaded)), k, parse_targets(targets)


def predictions_plot(result: FillMaskResult, mask_token: str) -> go.Figure:
    """The top-k bar charts of ``result`` (one subplot per mask), on one probability scale from 0."""
    many = len(result.masks) > 1
    return fill_mask_plots.predictions_figure(
        tokens=[[ts if ts.strip() else (t or f"[id {i}]") for ts, t, i in zip(m.token_strs, m.tokens, m.token_ids)]
                for m in result.masks],
        scores=[m.scores for m in result.masks],
        token_ids=[m.token_ids for m in result.masks],
        titles=[f"{mask_token} {m.index + 1}" if many else mask_token for m in result.masks])


def fill(services: Services, model_key: str | None, text: str | None, top_k: Any,
         targets: str | None) -> tuple[go.Figure, Any, list[tuple[str, str | None]], str, str]:
    """Validate, run ``inference.fill_mask_details`` (and ``joint_fill`` with several masks) once per input
    (``explorer/fill_mask/kept.py``: Top-k or targets changes read the kept logits) and build the five outputs: chart,
    pipeline JSON, per-mask top guesses, summary, joint fill Markdown ("" with one mask)."""
    with services.probing():
        loaded, text, k, words = _prepare(services, model_key, text, top_k, targets)
        result = kept.fill_details(services, loaded, text, k, words)    # a Top-k or targets change: no model
        joint = kept.joint_details(services, loaded, text) if len(result.masks) > 1 else None
    mask_token = mask_token_of(loaded)
    for warning in result.warnings:
        gr.Warning(warning)
    return (named_for(predictions_plot(result, mask_token), loaded.source, text, "Top-k per mask"),
            result.to_pipeline(),
            highlighted_fill(text, mask_token, result), summary_markdown(result, mask_token),
            joint_markdown(joint, mask_token, words is not None))


def zoomed_plot(plot: Any, zoom: bool) -> go.Figure | Any:
    """The chart shown now (the Plot's value, its figure as JSON) with each mask on its own probability scale
    (``zoom``) or all on one; no model runs. ``gr.skip()`` when no chart is shown (or the value is not one)."""
    text = plot.get("plot") if isinstance(plot, dict) else getattr(plot, "plot", None)
    if not isinstance(text, str) or not text:
        return gr.skip()
    try:
        figure = pio.from_json(text)
    except ValueError:                            # not a figure: leave the chart alone
        return gr.skip()
    return fill_mask_plots.zoom_figure(figure, bool(zoom))


def pick_evenly(choices: list[ModelChoice], cap: int = MAX_CHECKPOINTS) -> list[ModelChoice]:
    """At most ``cap`` checkpoints, evenly spaced (see ``explorer.models.choices.evenly_spaced``)."""
    return evenly_spaced(choices, cap)


def over_training_table(labels: list[str], results: list[FillMaskResult], mask_token: str) -> pd.DataFrame:
    """One row per (mask, tracked token), one probability column per checkpoint (best at the last first), as
    percentages ("0.0182%", "<0.001%"), never an exponent."""
    rows = []
    for m, mask in enumerate(results[-1].masks):
        tokens = list(mask.tracked)
        tokens.sort(key=lambda t: -mask.tracked[t])
        for token in tokens:
            rows.append([f"{mask_token} {m + 1}", token,
                         *(percent(r.masks[m].tracked.get(token, 0.0)) for r in results)])
    return pd.DataFrame(rows, columns=TABLE_BASE + labels)


def over_training(services: Services, model_key: str | None, text: str | None, top_k: Any,
                  targets: str | None, run: str | None = None) -> tuple[go.Figure, pd.DataFrame, str]:
    """The same sentence over the checkpoints of ``run`` (default: the picked checkpoint's run, else the
    newest): chart, table and a note."""
    require_text(text, empty_message=EMPTY_MESSAGE)
    k = check_top_k(top_k)
    words = parse_targets(targets)
    choices = services.registry().run_checkpoints(model_key, run)
    if len(choices) < 2:
        raise gr.Error(f"Probing over training needs a run with at least 2 saved checkpoints; found "
                       f"{len(choices)}. Start a training run in the Training tab and wait for its checkpoints.",
                       print_exception=False)
    picked = pick_evenly(choices)
    with services.probing():
        models = []
        for choice in picked:
            cancellation.check()                  # a cancelled request stops between loads
            loaded = services.model(choice.key)
            loaded.require_head("mlm")
            models.append(loaded)
        mask_token = mask_token_of(models[-1])
        text = prepare_text(text, mask_token)
        if targets:
            check_length(targets, "targets")
        probes = inference.fill_mask_over_checkpoints(models, text, k, words)
    del models
    labels = [f"step {c.step}" if c.step is not None else c.label for c in picked]
    results = [result for _, result in probes]
    n = len(results[-1].masks)
    fig = fill_mask_plots.over_training_figure(
        steps=[c.step for c in picked], labels=labels, tracked=[[m.tracked for m in r.masks] for r in results],
        titles=[f"{mask_token} {m + 1}" if n > 1 else mask_token for m in range(n)])
    name = picked[0].run
    note = (run_note(name, len(picked), len(choices), choices[0].step, choices[-1].step)
            + f" (steps {', '.join(str(c.step) for c in picked)}); each line is a token that was in some "
            f"checkpoint's top-{results[-1].top_k}.")
    fig = named_for(fig, f"run {name}", text, "Probability vs training step")
    return fig, over_training_table(labels, results, mask_token), note


def _over_training_section(services: Services) -> dict[str, Any]:
    """The *Probe over checkpoints* accordion: the run, the button, a note, the chart and the table."""
    with gr.Accordion("Probe over checkpoints", open=False):
        gr.Markdown("The same sentence on the checkpoints of a run (by default the picked checkpoint's run, "
                    "else the newest): how the probability of each candidate changes with training.")
        with gr.Row():
            over_run = run_picker.build(services)
            over_button = gr.Button("Probe over checkpoints")
        over_note = gr.Markdown()
        over_plot = gr.Plot(label="Probability vs training step")
        over_table = gr.Dataframe(label="Probabilities per checkpoint", interactive=False, wrap=False,
                                  max_height=360)

    return {"over_run": over_run, "over_button": over_button, "over_note": over_note, "over_plot": over_plot,
            "over_table": over_table}


def _handlers(services: Services) -> tuple[Callable[..., tuple[Any, ...]], Callable[..., tuple[Any, ...]]]:
    """The tab's main action (its button, Enter and the examples) and the probe over checkpoints."""
    def run(model_key: str, text: str, top_k: float, targets: str) -> tuple[Any, ...]:
        """Predict the tokens hidden behind every [MASK] in a text.

        Args:
            model_key: the model (picker key, e.g. "default" or "checkpoint:<run>/<step-dir>").
            text: a text with 1 to 20 [MASK] tokens.
            top_k: how many candidates per mask (1..50).
            targets: optional comma-separated words to score instead of the whole vocabulary.
        Returns:
            the top-k chart, the pipeline-shaped results, each mask's own top guess highlighted, a summary,
            and with 2 or more masks the joint fill as Markdown (masks filled one at a time, the surest first;
            "" with one mask).
        """
        return fill(services, model_key, text, top_k, targets)

    def run_over_training(model_key: str, text: str, top_k: float, targets: str,
                          run: str = run_picker.AUTO) -> tuple[Any, ...]:
        """Probe one masked sentence across the checkpoints of a training run.

        Args:
            model_key: a checkpoint key picks its run; any other key uses the newest run (unless run is given).
            text: a text with 1 to 20 [MASK] tokens.
            top_k: candidates per mask and checkpoint (1..50).
            targets: optional comma-separated words to score.
            run: the run's name (a folder under the runs folder); empty for the picked checkpoint's run, else the newest.
        Returns:
            the probability-vs-step chart, a table per checkpoint and a note on what was probed.
        """
        return over_training(services, model_key, text, top_k, targets, run)

    return run, run_over_training


def _wire_zoom(zoom: Any, plot: Any, runs: list[Any]) -> None:
    """*Zoom* redraws the chart shown (no model runs), and a new chart follows the box once its action succeeds."""
    def redraw(plot: Any, zoom: bool) -> Any:
        return zoomed_plot(plot, zoom)

    def follow(plot: Any, zoom: bool) -> Any:
        return zoomed_plot(plot, zoom) if zoom else gr.skip()          # a new chart comes on the shared scale

    quiet: dict[str, Any] = dict(gpu=False, clear=False, api_visibility="private", show_progress="hidden")
    endpoint(zoom.change, redraw, [plot, zoom], [plot], api_name="fill_mask_zoom", trigger_mode="always_last", **quiet)
    for event, name in zip(runs, ("fill_mask", "fill_mask_submit", "fill_mask_example_run")):
        endpoint(event.success, follow, [plot, zoom], [plot], api_name=f"{name}_then_zoom", **quiet)


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Fill-mask tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text with [MASK] tokens", lines=2, placeholder="Nice to [MASK] you.")
            targets = gr.Textbox("", label="Targets (optional)", max_lines=1, info="comma-separated words to score",
                                 placeholder="e.g. cat, dog")
        with gr.Column(scale=1, min_width=220):
            top_k = gr.Slider(1, MAX_TOP_K, value=DEFAULT_TOP_K, step=1, label="Top-k")
            button = gr.Button("Fill", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[text, targets], label="Examples", cache_examples=False,
                           api_name="fill_mask_example", api_visibility="private")
    with gr.Row(equal_height=False):
        filled = gr.HighlightedText(label=PER_MASK_LABEL, show_legend=False, show_inline_category=True,
                                    combine_adjacent=False, scale=1)
        joint = gr.Markdown(elem_classes=["fill-joint"])   # empty, so not shown, with one mask
    summary = gr.Markdown(elem_classes=["token-summary"])
    zoom = gr.Checkbox(False, label=ZOOM_LABEL, container=False)
    plot = gr.Plot(label="Top-k per mask")
    with gr.Accordion("Results as JSON (the transformers fill-mask pipeline's format)", open=False):
        results = gr.JSON(label="fill-mask output")
    over = _over_training_section(services)
    run, run_over_training = _handlers(services)
    inputs = [picker.dropdown, text, top_k, targets]
    events = wire_run(button, text, examples, run, inputs, [plot, results, filled, summary, joint],
                      api_name="fill_mask", show_progress="minimal")
    _wire_zoom(zoom, plot, events)
    endpoint(over["over_button"].click, run_over_training, [*inputs, over["over_run"]],
             [over["over_plot"], over["over_table"], over["over_note"]], api_name="fill_mask_over_training",
             show_progress="minimal", heavy=True)
    return {"text": text, "targets": targets, "top_k": top_k, "zoom": zoom, "button": button, "plot": plot,
            "results": results, "filled": filled, "summary": summary, "joint": joint,
            **{name: over[name] for name in ("over_button", "over_plot", "over_table", "over_note")}}


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each example, when ``loaded`` has a masked-LM head (the demo warm-up runs them)."""
    if "mlm" not in loaded.heads:
        return []
    mask = mask_token_of(loaded)
    return [(f"fill_mask {i}", lambda t=text, g=targets: inference.fill_mask(
        loaded, prepare_text(t, mask), top_k=DEFAULT_TOP_K, targets=parse_targets(g)))
        for i, (text, targets) in enumerate(EXAMPLES)]
