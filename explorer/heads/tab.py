"""Heads tab: try each task head of the picked model. One tab with an inner tab per head (*Next sentence*,
*Classify*, *Tag words*, *Choose*, *Replaced tokens*), so the app's tab row stays short; QA keeps its own tab.

Each section says above its inputs whether the picked model has its head (refreshed when the picker
changes), and a model without it gets one sentence naming the head and how to get one.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.choose import choose as run_choose
from engine.probes.heads.classify import classify_details
from engine.probes.heads.next_sentence import next_sentence as run_next_sentence
from engine.probes.heads.replaced_tokens import replaced_tokens as run_replaced_tokens
from engine.probes.heads.tag import tag_details
from explorer.heads import choose, classify, next_sentence, replaced_tokens, tag
from explorer.glossary import gloss
from explorer.heads.common import head_status
from explorer.models.picker import ModelPicker
from explorer.services import Services

# (inner tab title, id, section module) in the order shown: Next sentence first, the default model has its head.
SECTIONS = (("Next sentence", "heads_next_sentence", next_sentence), ("Classify", "heads_classify", classify),
            ("Tag words", "heads_tag_words", tag), ("Choose", "heads_choose", choose),
            ("Replaced tokens", "heads_replaced_tokens", replaced_tokens))

INTRO = f"""\
BERT is pretrained once and then **{gloss("fine-tune", "fine-tuned")} with one small head per task**. Each inner tab
tries one head on the model picked above. The bundled default model has the pretraining heads
(masked LM, next sentence) and a QA head; fine-tune it in the Fine-tune tab for the others,
then pick the result in the model picker (*Replaced tokens* needs an ELECTRA discriminator).
"""


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Heads tab's inner tabs inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    widgets: dict[str, Any] = {}
    with gr.Tabs() as inner:
        for title, tab_id, section in SECTIONS:
            with gr.Tab(title, id=tab_id):
                widgets[section.HEAD] = section.build(services, picker)
    widgets["tabs"] = inner                     # the inner tabs: a link selects one (explorer/serving/links)
    statuses = [widgets[section.HEAD]["status"] for _, _, section in SECTIONS]
    heads = [section.HEAD for _, _, section in SECTIONS]

    def show_status(key: str | None) -> tuple[str, ...]:
        return tuple(head_status(services, key, head) for head in heads)

    # picker.info changes after the picked model was described (so it is loaded): one check per section.
    picker.info.change(show_status, inputs=[picker.dropdown], outputs=statuses, api_visibility="private",
                       show_progress="hidden")
    return widgets


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each section's examples that ``loaded`` has the head for (the demo warm-up runs them)."""
    calls: list[tuple[str, Callable[[], object]]] = []
    if next_sentence.HEAD in loaded.heads:
        calls += [(f"next_sentence {i}", lambda a=a, b=b: run_next_sentence(loaded, a, b))
                  for i, (a, b) in enumerate(next_sentence.EXAMPLES)]
    if classify.HEAD in loaded.heads:
        calls += [(f"classify {i}", lambda t=t, p=p: classify_details(loaded, t, p or None))
                  for i, (t, p) in enumerate(classify.EXAMPLES)]
    if tag.HEAD in loaded.heads:
        calls += [(f"tag_words {i}", lambda t=t: tag_details(loaded, t)) for i, (t,) in enumerate(tag.EXAMPLES)]
    if choose.HEAD in loaded.heads:
        calls += [(f"choose {i}", lambda c=c, o=o: run_choose(loaded, c, choose.parse_choices(o)))
                  for i, (c, o) in enumerate(choose.EXAMPLES)]
    if replaced_tokens.HEAD in loaded.heads:
        calls += [(f"replaced_tokens {i}", lambda t=t: run_replaced_tokens(loaded, t))
                  for i, (t,) in enumerate(replaced_tokens.EXAMPLES)]
    return calls
