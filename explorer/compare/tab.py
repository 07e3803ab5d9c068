"""The Compare tab: two models on one input, side by side (``engine.probes.comparison.compare``).

Pick model A and model B (any two keys the picker offers: checkpoints of a run, the default model and
a fine-tuned copy, a loaded folder), type a text, and see how alike their layers are (debiased linear CKA per
layer over the bundled sentence set and on the text, each with its token count and a caution when the text's
tokens are few: ``explorer.compare.similarity``; every layer pair as a heatmap), one attention head in both with
the difference, and, with a
``[MASK]``, both models' fillers with the change. *Step through a run* compares a run's checkpoint at
the slider with the run's last checkpoint: slide to watch a representation settle during training.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr
import pandas as pd

from engine.model.loaded_model import LoadedModel
from engine.probes.comparison.compare import ModelComparison, compare_models
from engine.probes.comparison.sentence_set import SetComparison
from explorer.runs import run_picker as run_picker
from explorer.layer_numbers import HEAD_LABEL, LAYER_LABEL, head_index
from explorer.compare import plots, similarity
from explorer.compare.alignment import alignment_note, pair_names
from explorer.compare.notes import untrained_mlm_note
from explorer.endpoints import endpoint, wire_run
from explorer.formatting import percent
from explorer.glossary import gloss
from explorer.models.keys import UNTRAINED, KeyKind, ModelKey
from explorer.models.picker import ModelPicker, dropdown_choices
from explorer.services import Services
from explorer.ui_errors import require_text, whole_number
from explorer.views.export_names import export_info
from explorer.views.plot_names import named

API_NAME = "compare"
MAX_INDEX = 1_000              # layer and head boxes: the picked models' own ranges: explorer.layer_numbers
EXAMPLES = [["The United [MASK] of America.", 1, 0], ["The cat sat on the [MASK] and purred.", 3, 3],
            ["She went to the bank to deposit her money.", 6, 1]]               # layer (from 1), head (from 0)
FILLER_COLUMNS = ["mask", "filler", "P(A)", "P(B)", "change", "rank in A", "rank in B"]
INTRO = ("Put **two models side by side** on one input: two checkpoints of your run, the default model and "
         "its fine-tuned copy, a model you loaded. **Debiased linear {cka}** says how alike their representations are "
         "at each layer (1 = the same up to rotation and scale, about 0 = unrelated), over a bundled set of plain "
         "English sentences and on your input; each value says how many tokens it is over, because a few tokens "
         "against hundreds of dimensions say little (the plain estimator then leans towards 1). The attention of one "
         "head is drawn in both with its difference; with a `[MASK]`, both models' fillers are listed with the "
         "change (probabilities, the {softmax} of the {logit}s, as percentages). Models whose tokenizers differ (BERT "
         "and RoBERTa, a model and its distilled copy) are lined up **by words**: each word's vector is the mean of "
         "its pieces', and the fillers are compared by the word they write. "
         "Before you train a run, B is the default model's *untrained twin* (the same network with fresh random "
         "weights): what pretraining changed (a low CKA). Comparing a model with itself gives CKA 1 at every layer "
         "and B − A zero, which is how *the same* looks."
         "\n\n**How layers are numbered** (the same in every tab): {layer} 0 is the embeddings' output and layers "
         "1 to L the outputs of the L encoder layers, so the CKA chart runs from 0 to L; the heads of layer *k* "
         "make layer *k*'s output, so the attention layer is chosen from 1 to L. Heads are numbered from 0.").format(
    cka=gloss("CKA"), softmax=gloss("softmax"), logit=gloss("logit"), layer=gloss("layer", "Layer"))


def model_choices(services: Services) -> list[tuple[str, str]]:
    return dropdown_choices(services.registry().choices())


def initial_models(keys: list[str]) -> tuple[str | None, str | None]:
    """Models A and B the tab opens on: the default model against a checkpoint of a run if there is one, else
    against its untrained twin (what training changed); two different models whenever there are two."""
    first_b = next((k for k in keys if ModelKey.parse(k).kind is KeyKind.CHECKPOINT),
                   UNTRAINED.text if UNTRAINED.text in keys else keys[0] if keys else None)
    return ("default" if "default" in keys else first_b), first_b


def short_name(source: str, limit: int = 36) -> str:
    """A model's name for a figure title: its last ``limit`` characters (a checkpoint's step is at the end)."""
    return source if len(source) <= limit else "…" + source[-(limit - 1):]


def filler_table(comparison: ModelComparison) -> pd.DataFrame:
    """One row per filler of each mask: both probabilities, the change and both ranks."""
    rows = [[m.index + 1, f.token, percent(f.prob_a), percent(f.prob_b),
             ("+" if f.change >= 0 else "−") + percent(abs(f.change)), _rank(f.rank_a), _rank(f.rank_b)]
            for m in comparison.masks for f in m.fillers]
    return pd.DataFrame(rows, columns=FILLER_COLUMNS)


def _rank(rank: int | None) -> int | str:
    """A rank as listed: "—" for a word the model's vocabulary cannot write as one piece."""
    return "—" if rank is None else rank


def summary_markdown(comparison: ModelComparison, layer: int, head: int, notes: Sequence[str] = (),
                     over_set: SetComparison | str | None = None) -> str:
    """Which models, how many tokens (or aligned words, and how they were aligned), how alike their layers are over
    the sentence set ``over_set`` and on this input (with the token counts and a caution when they are few), each
    mask's top filler in both and, when there are masks, ``notes`` on them (a model whose masked-LM head was not
    trained). ``layer`` is the attention layer as shown (from 1)."""
    unit = "tokens" if comparison.alignment is None else "words"
    lines = [f"**A** `{comparison.source_a}` · **B** `{comparison.source_b}` · {len(comparison.tokens)} {unit}"]
    aligned = alignment_note(comparison)
    if aligned:
        lines.append(aligned)
    lines += similarity.summary_lines(comparison, "the sentence set was not compared" if over_set is None
                                      else over_set)
    for mask in comparison.masks:
        best_a = max(mask.fillers, key=lambda f: f.prob_a)
        best_b = max(mask.fillers, key=lambda f: f.prob_b)
        lines.append(f"Mask {mask.index + 1}: A's top filler **{best_a.token}** ({percent(best_a.prob_a)}), "
                     f"B's **{best_b.token}** ({percent(best_b.prob_b)}).")
    if comparison.masks:
        lines += list(notes)
    lines.append(f"Attention: layer {layer}, head {head} (layers with attention from 1, heads from 0).")
    return "  \n".join(lines)


def predict(services: Services, key_a: str | None, key_b: str | None, text: str | None, layer: Any,
            head: Any, top_k: Any = 5) -> tuple[Any, ...]:
    """Compare and build the outputs: summary, filler table, similarity line, CKA heatmap, attention pair."""
    require_text(text, empty_message="Type a sentence to compare the two models on, e.g. "
                                     "'The capital of France is [MASK].'")
    if not key_a or not key_b:
        raise gr.Error("Choose two models: model A and model B.", print_exception=False)
    layer, head = whole_number(layer, "Layer", 0, MAX_INDEX), whole_number(head, "Head", 0, MAX_INDEX)
    top_k = whole_number(top_k, "Top k", 1, 50)
    with services.probing():
        model_a, model_b = services.model(key_a), services.model(key_b)
        comparison = compare_models(model_a, model_b, text, top_k=top_k)
        over_set = similarity.set_comparison(services, model_a, model_b)
        notes = [n for n in (untrained_mlm_note("A", model_a), untrained_mlm_note("B", model_b)) if n]
    depth = min(comparison.attention_a.num_layers, comparison.attention_b.num_layers)
    heads = min(comparison.attention_a.num_heads, comparison.attention_b.num_heads)
    index, head = head_index(depth, heads, layer, head)           # ValueError names the valid range, from 1
    map_a, map_b, difference = comparison.attention_maps(index, head)
    label_a, label_b = short_name(comparison.source_a), short_name(comparison.source_b)
    names = None if comparison.same_depth_cka is not None else pair_names(comparison.layer_pairs)
    line = plots.similarity_figure(similarity.similarity_lines(comparison, over_set), label_a, label_b, names=names,
                                   note=similarity.figure_note(comparison, over_set))
    grid, over = ((over_set.cka, similarity.set_label(over_set)) if isinstance(over_set, SetComparison)
                  else (comparison.cka, f"this input ({similarity.input_label(comparison)})"))
    info = export_info(f"{label_a} vs {label_b}", text)              # the charts' export names
    return (summary_markdown(comparison, layer, head, notes, over_set), filler_table(comparison),
            named(line, info, "How alike the layers are"),
            named(plots.cka_heatmap(grid, label_a, label_b, over=over), info, "Debiased linear CKA"),
            named(plots.attention_pair_figure(map_a, map_b, difference, comparison.tokens, layer, head, label_a,
                                              label_b), info, f"One head in both models L{layer} H{head}"))


def scrub(services: Services, run: str | None, index: Any, text: str | None, layer: Any, head: Any,
          top_k: Any = 5) -> tuple[Any, ...]:
    """A = the run's checkpoint at ``index`` (0 = oldest), B = its last checkpoint; the comparison's outputs
    after the two keys and a note naming the steps."""
    checkpoints = services.registry().run_checkpoints(None, run or None)
    if not checkpoints:
        raise gr.Error("There are no checkpoints yet: start a run in the Training tab.", print_exception=False)
    index = min(whole_number(index, "The checkpoint position", 0), len(checkpoints) - 1)   # past the last: the last
    key_a, key_b = checkpoints[index].key, checkpoints[-1].key
    outputs = predict(services, key_a, key_b, text, layer, head, top_k)
    note = (f"Checkpoint {index + 1} of {len(checkpoints)} (**A**: {checkpoints[index].label}) against the run's "
            f"last (**B**: {checkpoints[-1].label}).")
    return (key_a, key_b, note, *outputs)


def _widgets(services: Services) -> dict[str, Any]:
    """The two models, the text, layer, head and top k, the button and the examples."""
    choices = model_choices(services)
    first_a, first_b = initial_models([key for _, key in choices])
    with gr.Row():
        model_a = gr.Dropdown(choices, value=first_a, label="Model A", allow_custom_value=True, interactive=True)
        model_b = gr.Dropdown(choices, value=first_b, label="Model B", allow_custom_value=True, interactive=True)
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=2, placeholder="The capital of France is [MASK].")
        with gr.Column(scale=1, min_width=220):
            with gr.Row():
                layer = gr.Number(1, label=LAYER_LABEL, precision=0, minimum=1)
                head = gr.Number(0, label=HEAD_LABEL, precision=0, minimum=0)
                top_k = gr.Number(5, label="Top k", precision=0, minimum=1, maximum=50)
            button = gr.Button("Compare", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[text, layer, head], label="Examples", cache_examples=False,
                           api_name=f"{API_NAME}_example", api_visibility="private")
    return {"model_a": model_a, "model_b": model_b, "text": text, "layer": layer, "head": head, "top_k": top_k,
            "button": button, "examples": examples}


def _scrubber(services: Services) -> dict[str, Any]:
    """The *Step through a run* accordion: the run, the checkpoint slider and a note."""
    with gr.Accordion("Step through a run: a checkpoint against the run's last", open=False) as scrubber:
        with gr.Row():
            run = run_picker.build(services)
            count = len(services.registry().run_checkpoints())
            position = gr.Slider(0, max(1, count - 1), value=0, step=1, label="Checkpoint (0 = the oldest)")
        run_note = gr.Markdown()
    return {"scrubber": scrubber, "run": run, "position": position, "run_note": run_note}


def _views() -> dict[str, Any]:
    """The summary, the similarity line, the attention pair, the fillers and the CKA heatmap."""
    summary = gr.Markdown(elem_classes=["token-summary"])
    similarity = gr.Plot(label="How alike the layers are")
    attention = gr.Plot(label="One head in both models")
    fillers = gr.Dataframe(headers=FILLER_COLUMNS, label="Fill-mask in both models", interactive=False)
    with gr.Accordion("Every layer pair (debiased linear CKA over the sentence set)", open=False):
        heatmap = gr.Plot(label="Debiased linear CKA, layer by layer")
    return {"summary": summary, "similarity": similarity, "attention": attention, "fillers": fillers,
            "heatmap": heatmap}


# --- the handlers (the endpoints' API: parameter names, defaults and docstrings) ---------

def _compare_handler(services: Services) -> Callable[..., tuple[Any, ...]]:
    """The tab's main action (its button, Enter and the examples)."""
    def run_compare(model_a: str, model_b: str, text: str, layer: float, head: float, top_k: float = 5) -> tuple[Any, ...]:
        """Compare two models on one input.

        Args:
            model_a: a model key (e.g. "default", "checkpoint:<run>/step-000100").
            model_b: another model key; when the two tokenizers read the text differently, the models are
                compared by words (the summary says how many).
            text: the input; with [MASK] the fill-mask predictions are compared too.
            layer: the attention layer to draw, from 1 (layer 0 is the embeddings' output, which has no attention).
            head: the attention head to draw, from 0.
            top_k: fillers listed per model and mask (1 to 50).
        Returns:
            a summary (with a note when the models were aligned by words, and when a model was fine-tuned for a
            task and its masked-LM head was not trained),
            the fillers of both models (mask, filler, P(A), P(B), change, ranks), debiased linear CKA per layer from
            0 (the embeddings' output) to L over the bundled sentence set and on the text (with the plain estimator
            and the mean cosine on the text; each line names its token count, and the subtitle cautions when the
            text has fewer tokens than the models have dimensions), debiased linear CKA of every layer pair over the
            sentence set, and the head's attention in A, in B and B - A.
        """
        return predict(services, model_a, model_b, text, layer, head, top_k)

    return run_compare


def _over_run_handlers(services: Services) -> tuple[Callable[..., tuple[Any, ...]], Callable[..., Any]]:
    """The checkpoint slider's comparison, and the fit of its range to the run's checkpoints."""
    def compare_over_run(run: str, position: float, text: str, layer: float, head: float,
                         top_k: float = 5) -> tuple[Any, ...]:
        """Compare a run's checkpoint with the run's last checkpoint.

        Args:
            run: the run's name ("" = the newest run).
            position: which checkpoint, 0 = the oldest.
            text: the input.
            layer: the attention layer to draw, from 1 (layer 0 is the embeddings' output, which has no attention).
            head: the attention head to draw, from 0.
            top_k: fillers listed per model and mask.
        Returns:
            model A's and model B's keys, a note naming both checkpoints, then the outputs of /compare.
        """
        return scrub(services, run, position, text, layer, head, top_k)

    def slider_range(run: str | None) -> Any:
        count = len(services.registry().run_checkpoints(None, run or None))
        return gr.update(maximum=max(1, count - 1), value=max(0, count - 1))

    return compare_over_run, slider_range


# --- the tab -----------------------------------------------------------------------------

def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Compare tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    w = {**_widgets(services), **_scrubber(services), **_views()}
    _wire(services, w)
    return {name: w[name] for name in WIDGETS}


WIDGETS = ("model_a", "model_b", "text", "layer", "head", "top_k", "button", "summary", "fillers", "similarity",
           "heatmap", "attention", "run", "position", "run_note")          # what :func:`build` returns


def _wire(services: Services, w: dict[str, Any]) -> None:
    """Declare the tab's events on its widgets ``w`` (in the order the API lists them)."""
    model_a, model_b, run, position = w["model_a"], w["model_b"], w["run"], w["position"]
    for box in (model_a, model_b):
        box.focus(lambda current: gr.update(choices=model_choices(services), value=current), inputs=[box],
                  outputs=[box], api_visibility="private", show_progress="hidden", queue=False)
    outputs = [w[name] for name in ("summary", "fillers", "similarity", "heatmap", "attention")]
    inputs = [w[name] for name in ("text", "layer", "head", "top_k")]
    wire_run(w["button"], w["text"], w["examples"], _compare_handler(services), [model_a, model_b, *inputs],
             outputs, api_name=API_NAME, show_progress="minimal", heavy=True)
    compare_over_run, slider_range = _over_run_handlers(services)
    # .input (a person moves it: mouse or keys), not .release (mouse only) or .change (also when the range is fitted)
    endpoint(position.input, compare_over_run, [run, position, *inputs],
             [model_a, model_b, w["run_note"], *outputs], api_name="compare_over_run", clear=outputs,
             show_progress="minimal", trigger_mode="always_last", heavy=True)
    for event in (run.change, w["scrubber"].expand):        # runs write checkpoints while the page is open
        endpoint(event, slider_range, [run], [position], api_name="slider_range", gpu=False, clear=False,
                 api_visibility="private", show_progress="hidden")


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """Compare needs two models: no examples to warm up."""
    return []
