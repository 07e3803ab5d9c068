"""What the sections of the Heads tab share: the model with the head they need, or one clear sentence."""
from __future__ import annotations

import gradio as gr

from engine.model.loaded_model import LoadedModel
from engine.model.families.registry import FAMILIES
from engine.model.head_specs import HEADS, HeadSpec
from explorer.model_description import specs_of
from explorer.services import Services


def head_spec(loaded: LoadedModel, head: str) -> HeadSpec | None:
    """The spec of ``head`` as the Heads tab names it: BERT's (the section's own, whatever variant a family has),
    else the model's own table's, else that of the first family declaring it (ELECTRA's replaced-token detection
    for a BERT model); None for a head no table knows."""
    if head in HEADS:
        return HEADS[head]
    specs = specs_of(loaded)
    if head in specs:
        return specs[head]
    return next((spec for family in FAMILIES.values() for spec in family.heads if spec.name == head), None)


def models_with(head: str) -> list[str]:
    """Which models carry ``head``, a head of a family's own (BERT has none by that name), by their transformers
    class: ``["ELECTRA models saved as ElectraForPreTraining"]``; empty for one of BERT's heads."""
    if head in HEADS:
        return []
    found: dict[str, None] = {}
    for family in FAMILIES.values():
        for spec in family.heads:
            if spec.name == head:
                for name in family.architectures_to_theirs([spec.hf_class]) or []:
                    found[f"{family.name} models saved as {name}"] = None
    return list(found)


def missing_head_message(loaded: LoadedModel, head: str) -> str:
    """One sentence: which head the picked model lacks, what it has, and how to get a model with it: the head's
    ``how_to_get`` (each of BERT's heads tried in the Heads tab has one), else the classes of the families that
    declare it (a model of one loaded in *Load another model*)."""
    specs = specs_of(loaded)
    has = ", ".join(specs[h].title for h in loaded.heads if h in specs) or "none (encoder only)"
    spec = head_spec(loaded, head)
    named = head if spec is None else spec.title if head in HEADS else spec.noun
    start = f"The picked model ({loaded.source}) has no {named} head (its heads: {has})."
    if spec is not None and spec.how_to_get:
        return f"{start} To try this, {spec.how_to_get}, then pick the result in the model picker above."
    classes = models_with(head)
    if not classes:
        return f"{start} Pick a model with that head in the model picker above."
    return (f"{start} {' and '.join(classes)} have one: to try this, load one in *Load another model*, then pick "
            "the result in the model picker above.")


def model_with_head(services: Services, model_key: str | None, head: str) -> LoadedModel:
    """The model ``model_key`` names, or ``gr.Error`` when it lacks ``head`` (``ValueError``, which the tab's
    ``friendly_errors`` shows, when it has no tokenizer); never a crash."""
    loaded = services.model(model_key)
    if head not in loaded.heads:
        raise gr.Error(missing_head_message(loaded, head), print_exception=False)
    loaded.require_tokenizer("so it cannot read text; pick another model")
    return loaded


def head_status(services: Services, model_key: str | None, head: str) -> str:
    """Markdown saying whether the picked model can run this section (shown above its inputs)."""
    try:
        with services.probing():
            loaded = services.model(model_key)
    except (ValueError, OSError):
        return ""
    if head in loaded.heads:
        return f"✅ The picked model has a {specs_of(loaded)[head].title} head."
    return f"⚠️ {missing_head_message(loaded, head)}"
