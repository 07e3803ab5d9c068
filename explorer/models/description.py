"""What the model picker says about a model: where it comes from, its family and size, its heads (and where to try
the fine-tuned ones, with their labels) and the heads it lacks; and the one sentence every tab says when the
picked model lacks the head it needs (``missing_head_message``)."""
from __future__ import annotations

from collections.abc import Mapping

from engine.model.loaded_model import LoadedModel
from engine.checkpoints.model_fit import count_text
from engine.model.config import BertConfig
from engine.model.families.registry import FAMILIES, family_of
from engine.model.head_specs import HEADS, HeadSpec

MAX_NAMED_LABELS = 6


def specs_of(loaded: LoadedModel) -> Mapping[str, HeadSpec]:
    """The model's own head table (``BertWithHeads.specs``: BERT's heads, a family's variants and its own heads,
    such as ELECTRA's replaced-token detection); BERT's ``HEADS`` for a model without one."""
    return getattr(loaded.model, "specs", HEADS)


def _tried_in(spec: HeadSpec, config: BertConfig) -> str:
    """`` (Heads › Tag words; 17 labels: NOUN, VERB, …)`` for a fine-tuned head, "" for the others."""
    if spec.tried_in is None:
        return ""
    where = spec.tried_in
    labels = [str(config.id2label[i]) for i in sorted(config.id2label or {})] if spec.labelled else []
    if not labels:
        return f" ({where})"
    named = ", ".join(labels[:MAX_NAMED_LABELS]) + (", …" if len(labels) > MAX_NAMED_LABELS else "")
    return f" ({where}; {len(labels)} labels: {named})"


def family_and_size(loaded: LoadedModel) -> str:
    """The model's family and parameter count, as the picker names it: "RoBERTa, 1.2M parameters"."""
    params = sum(p.numel() for p in loaded.model.parameters())
    return f"{family_of(loaded.config.model_type).name}, {count_text(params)} parameters"


def describe(loaded: LoadedModel) -> str:
    """Markdown: where the model comes from, its size, and which heads it has (and lacks)."""
    c = loaded.config
    params = sum(p.numel() for p in loaded.model.parameters())
    specs = specs_of(loaded)
    have = ", ".join(s.title + _tried_in(s, c) for h, s in specs.items() if h in loaded.heads) or "none (encoder only)"
    lines = [f"**{loaded.source}** · {family_of(c.model_type).name} · {count_text(params)} parameters · "
             f"{c.num_hidden_layers} layers × {c.num_attention_heads} heads · hidden {c.hidden_size} · "
             f"vocabulary {c.vocab_size:,} · {c.max_tokens} positions", f"Heads: {have}."]
    # the heads with a tab of their own (no tried_in) are named when missing; the fine-tuned ones are not
    missing = [s.title for s in HEADS.values() if s.tried_in is None and s.name not in loaded.heads]
    if missing:
        lines.append(f"No {', no '.join(missing)} head: tabs that need one say so.")
    if not any(specs[h].tried_in for h in loaded.heads):
        lines.append("No classification, tagging or multiple-choice head: add one in the **Fine-tune** tab.")
    if loaded.tokenizer is None:
        lines.append("⚠️ No tokenizer files: this model cannot read text.")
    return "  \n".join(lines)


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
