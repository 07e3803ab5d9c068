"""The Syntax tab ("What it knows"): attention heads that follow dependencies, layers that hold parts of speech,
and both over a run's checkpoints (``engine.probes.syntax``; the rules: docs/design/syntax-probes.md).

Three endpoints, each needing only the model key: ``/syntax_heads`` (every head against every relation, with
the fixed-offset baseline), ``/layer_probe`` (the UPOS probe and its control task by layer) and
``/syntax_over_training`` (the same over up to six checkpoints of a run). The data is the bundled UD sample or
an uploaded CoNLL-U file.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.heads import DIRECTIONS
from explorer.runs import run_picker as run_picker
from explorer.endpoints import endpoint, handler
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.syntax import links, views
from explorer.syntax.treebanks import BUNDLED, treebank_choices
from explorer.syntax.views import MAX_SENTENCES, MAX_UPLOAD_MB, TABLE_COLUMNS

DEFAULT_SENTENCES = 200
OVER_TRAINING_SENTENCES = 100
DEFAULT_RELATIONS = "det, case, nsubj, obj, amod"

INTRO = (
    "**What the model knows about grammar**, measured on sentences whose grammar is written down (Universal "
    "Dependencies: each word's {head} and the {relation} between them).\n\n"
    "**Heads that follow syntax** (Clark et al. 2019): an {attn} *finds* a relation when the word it attends to "
    "most is the word's head (*dependent → head*) or, the other way, the dependent (*head → dependent*). Each "
    "head's accuracy is set beside the **baseline**: always pointing a fixed number of words away (the best such "
    "offset for that relation). In bert-base single heads find determiners 94% of the time.\n\n"
    "**Layers that know parts of speech** (Hewitt & Liang 2019): a linear {probe} learns each word's {upos} from "
    "one layer's vectors; the same probe also learns a {control} (each word type a random fixed tag). The "
    "difference, {selectivity}, says how much the vectors, not the probe's memory, carry.\n\n"
    "**What it does not prove:** a head that points at heads may use word order or frequent word pairs, not "
    "grammar; a probe can learn on its own (hence the control task), and high accuracy shows the information is "
    "there, not that the model uses it. Few arcs make the best of many heads look good by chance: compare with "
    "the picker's *untrained* twin (random weights), which should beat almost no baseline. The probe view also trains a small "
    "attention-only parser (Clark et al.'s reached 77 {uas} on bert-base against 58 for the baseline).\n\n"
    "Attention layers are numbered from 1 and heads from 0 (head *3-8* is layer 3, head 8); probe layers from 0 "
    "(the embeddings' output)."
).format(head=gloss("dependency head"), relation=gloss("dependency relation"), attn=gloss("attention head"),
         probe=gloss("probe"), upos=gloss("UPOS", "part of speech"), control=gloss("control task"),
         selectivity=gloss("selectivity"), uas=gloss("UAS"))


def _handlers(services: Services) -> dict[str, Callable[..., Any]]:
    """The three endpoints' handlers (their parameters and docstrings are the API)."""
    def syntax_heads(model_key: str, sentences: float = DEFAULT_SENTENCES, data_file: str | None = None,
                     relation: str = "det", direction: str = DIRECTIONS[0], treebank: str = BUNDLED) -> tuple[Any, ...]:
        """Score every attention head against every dependency relation.

        Args:
            model_key: the model (e.g. "default", "checkpoint:<run>/step-000100").
            sentences: how many sentences of the data to use, from the first (2 to 1000).
            data_file: a CoNLL-U file; none for the bundled sample (UD English EWT, 300 sentences).
            relation: the relation drawn as a layers x heads grid (e.g. "det", "nsubj", "obj").
            direction: "dependent → head" (the word attends to its head) or "head → dependent".
            treebank: "bundled" (the sample) or a CoNLL-U file the server keeps, "server:<name>" (an upload wins).
        Returns:
            a summary, the relations x heads heatmap, the chosen relation's layers x heads grid, the best head
            per relation with its fixed-offset baseline, and every accuracy as JSON (layers from 1, heads from 0).
        """
        return views.heads_view(services, model_key, sentences, data_file, relation, direction, treebank)

    def layer_probe(model_key: str, sentences: float = DEFAULT_SENTENCES, data_file: str | None = None,
                    treebank: str = BUNDLED) -> tuple[Any, ...]:
        """Probe each layer for parts of speech (UPOS), beside the control task.

        Args:
            model_key: the model (e.g. "default").
            sentences: how many sentences of the data to use, from the first (2 to 1000); a quarter is held out.
            data_file: a CoNLL-U file; none for the bundled sample.
            treebank: "bundled" (the sample) or a CoNLL-U file the server keeps, "server:<name>" (an upload wins).
        Returns:
            a summary (with the attention-only parser's held-out UAS beside the fixed-offset baseline), the
            accuracy / control accuracy / selectivity chart by layer (0 = the embeddings' output), and the same
            numbers as JSON ("attention_parser": uas, baseline_uas, baseline_offset).
        """
        return views.probe_view(services, model_key, sentences, data_file, treebank)

    def syntax_over_training(model_key: str, run: str = run_picker.AUTO, sentences: float = OVER_TRAINING_SENTENCES,
                             data_file: str | None = None, relations: str = DEFAULT_RELATIONS,
                             treebank: str = BUNDLED) -> tuple[Any, ...]:
        """The best head per relation and the probe's selectivity at up to six checkpoints of a run.

        Args:
            model_key: a checkpoint key picks its run; any other key uses the newest run (unless run is given).
            run: the run's name; empty for the picked checkpoint's run, else the newest.
            sentences: how many sentences of the data to use (2 to 1000).
            data_file: a CoNLL-U file; none for the bundled sample.
            relations: the relations to draw, comma-separated (e.g. "det, nsubj, obj").
            treebank: "bundled" (the sample) or a CoNLL-U file the server keeps, "server:<name>" (an upload wins).
        Returns:
            a note naming the run and checkpoints, the lines over steps, and each checkpoint's numbers as JSON.
        """
        return views.over_training_view(services, model_key, run, sentences, data_file, relations, treebank)

    return {"heads": handler(syntax_heads, "syntax_heads", heavy=True),
            "probe": handler(layer_probe, "layer_probe", heavy=True), "over": syntax_over_training}


def _inputs() -> dict[str, Any]:
    """The data (sentences, a treebank on the server or the bundled sample, an upload) shared by the three views."""
    with gr.Row():
        with gr.Column():
            sentences = gr.Number(DEFAULT_SENTENCES, label=f"Sentences (the first ones of the data, 2 to "
                                  f"{MAX_SENTENCES})", precision=0, minimum=2, maximum=MAX_SENTENCES)
            treebank = gr.Dropdown(treebank_choices(), value=BUNDLED, label="Treebank", interactive=True,
                                   allow_custom_value=True,     # a file added after start; the handler checks it
                                   info="the bundled sample, or a CoNLL-U file the server keeps (an upload wins)")
        data_file = gr.File(label=f"Your CoNLL-U file (optional, UTF-8, at most {MAX_UPLOAD_MB} MB; none: the "
                                  "treebank above)", type="filepath", file_types=[".conllu", ".conll", ".txt"])
    # a file the admin adds after start is offered the next time the list is opened
    treebank.focus(lambda: gr.Dropdown(choices=treebank_choices()), None, treebank, api_visibility="private",
                   queue=False, show_progress="hidden")
    return {"sentences": sentences, "data_file": data_file, "treebank": treebank}


def _heads_section() -> dict[str, Any]:
    """Relation, direction, the button and the heads views."""
    gr.Markdown("### Heads that follow dependencies")
    with gr.Row():
        relation = gr.Dropdown(views.relation_choices(), value="det", label="Relation drawn", allow_custom_value=True,
                               interactive=True)
        direction = gr.Radio(list(DIRECTIONS), value=DIRECTIONS[0], label="Direction")
        button = gr.Button("Score the heads", variant="primary")
    summary = gr.Markdown()
    grid = gr.Plot(label="The chosen relation: each head's accuracy")
    table = gr.Dataframe(headers=TABLE_COLUMNS, label="Best head per relation, beside the fixed-offset baseline",
                         interactive=False, wrap=True, max_height=420, elem_classes=["syntax-best-heads"])
    overview = gr.Plot(label="Every head against every relation")
    with gr.Accordion("Every number (JSON)", open=False):
        numbers = gr.JSON()
    return {"relation": relation, "direction": direction, "heads_button": button, "heads_summary": summary,
            "overview": overview, "grid": grid, "table": table, "heads_json": numbers}


def _probe_section() -> dict[str, Any]:
    gr.Markdown("### Layers that know parts of speech")
    button = gr.Button("Probe the layers (slow: 10–40 s on 2 cores)")
    summary = gr.Markdown()
    chart = gr.Plot(label="UPOS probe by layer")
    with gr.Accordion("The numbers (JSON)", open=False):
        numbers = gr.JSON()
    return {"probe_button": button, "probe_summary": summary, "probe_chart": chart, "probe_json": numbers}


def _over_training_section(services: Services) -> dict[str, Any]:
    with gr.Accordion("Over training: when syntax appears in a run", open=False):
        gr.Markdown("Both measures at up to six checkpoints of a run (the picked checkpoint's run, else the newest): "
                    "watch a head learn to find determiners, a layer learn nouns from verbs. Each checkpoint takes "
                    "a few seconds the first time and is kept after.")
        with gr.Row():
            run = run_picker.build(services)
            over_sentences = gr.Number(OVER_TRAINING_SENTENCES, label="Sentences", precision=0, minimum=2,
                                       maximum=MAX_SENTENCES)
            relations = gr.Textbox(DEFAULT_RELATIONS, label="Relations drawn (comma-separated)")
            button = gr.Button("Show over training")
        note = gr.Markdown()
        chart = gr.Plot(label="Over training")
        with gr.Accordion("The numbers (JSON)", open=False):
            numbers = gr.JSON()
    return {"run": run, "over_sentences": over_sentences, "relations": relations, "over_button": button,
            "over_note": note, "over_chart": chart, "over_json": numbers}


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Syntax tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    w = {**_inputs(), **_heads_section(), **_probe_section(), **_over_training_section(services)}
    _wire(services, picker, w)
    return w


HEADS_OUTPUTS = ("heads_summary", "overview", "grid", "table", "heads_json")


def _wire(services: Services, picker: ModelPicker, w: dict[str, Any]) -> None:
    """Declare the tab's events (in the order the API lists them)."""
    served = _handlers(services)
    heads_inputs = [picker.dropdown, w["sentences"], w["data_file"], w["relation"], w["direction"], w["treebank"]]
    heads_outputs = [w[name] for name in HEADS_OUTPUTS]
    endpoint(w["heads_button"].click, served["heads"], heads_inputs, heads_outputs, api_name="syntax_heads",
             show_progress="full")
    # another relation or direction: redrawn from the kept forward
    endpoint([w["relation"].input, w["direction"].input], served["heads"], heads_inputs, heads_outputs,
             api_name="syntax_heads_redraw", api_visibility="private", show_progress="minimal",
             trigger_mode="always_last")
    endpoint(w["probe_button"].click, served["probe"], [picker.dropdown, w["sentences"], w["data_file"], w["treebank"]],
             [w["probe_summary"], w["probe_chart"], w["probe_json"]], api_name="layer_probe", show_progress="full")
    endpoint(w["over_button"].click, served["over"], [picker.dropdown, w["run"], w["over_sentences"], w["data_file"],
                                                      w["relations"], w["treebank"]],
             [w["over_note"], w["over_chart"], w["over_json"]], api_name="syntax_over_training", heavy=True,
             show_progress="full")


def link(built: dict[str, dict[str, Any]], tabs: Any) -> None:
    """Cross-tab links, once every tab is built: a best-head row opens the Attention tab on its head."""
    links.wire(built["syntax"]["table"], tabs, built["attention"])


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """The Syntax views run many sentences at once: no examples to warm up."""
    return []
