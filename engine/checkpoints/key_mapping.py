"""Hugging Face BERT state-dict layouts <-> ours.

Our module names equal HF's ``BertFor*`` names (``bert.`` prefix, ``cls.predictions``,
``cls.seq_relationship``, ``qa_outputs``, ``classifier``), except two: HF calls the token-
classification and multiple-choice modules ``classifier`` too, and ours are ``token_classifier``
and ``multiple_choice``. ``config.json``'s ``architectures`` says which head a checkpoint's
``classifier.*`` keys are; one checkpoint holds at most one of the three. Each head's prefixes and
class are its ``HeadSpec`` (``engine.model.head_specs``); nothing here lists heads. A model of another family
has its own table of heads (``heads.head_specs_for``: the family's variants and heads of its own), passed as
``specs`` (default: ``HEADS``, BERT's); a family's head may take a joint class's name (ELECTRA's replaced-token
head is ``BertForPreTraining``, ``ElectraForPreTraining`` in the family's names), which then stands for it alone.

Loading accepts every BERT layout: ``BertModel`` (no prefix), the task classes, DDP's
``module.`` prefix and the old TF-port ``gamma``/``beta`` LayerNorm names. Saving writes
exactly the keys the chosen ``transformers`` class expects, so it loads with nothing missing
or unexpected.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from engine.model.head_specs import HEADS, JOINT_CLASSES, HeadSpec

Specs = Mapping[str, HeadSpec]

_ENCODER_PARTS = ("embeddings.", "encoder.", "pooler.")
_ENCODER_BUFFERS = ("bert.embeddings.position_ids", "bert.embeddings.token_type_ids")


def _joint_classes(specs: Specs) -> dict[str, tuple[str, ...]]:
    """The joint classes of ``specs``' heads: those whose heads it has, and whose name no head of it takes."""
    taken = {s.hf_class for s in specs.values()}
    return {name: heads for name, heads in JOINT_CLASSES.items()
            if name not in taken and all(h in specs for h in heads)}


def hf_classes(specs: Specs = HEADS) -> dict[str, tuple[tuple[str, ...], bool]]:
    """transformers class -> (the heads it carries, whether its encoder has the pooler), from the table of heads:
    the joint classes (``BertForPreTraining``), each head's class, and ``BertModel``."""
    joint = {name: (heads, any(specs[h].pooled for h in heads)) for name, heads in _joint_classes(specs).items()}
    return {**joint, **{s.hf_class: ((s.name,), s.pooled) for s in specs.values()}, "BertModel": ((), True)}


def _derived(specs: Specs) -> set[str]:
    """Keys that carry no information of their own: buffers and tied weights (the MLM decoder's)."""
    return {*_ENCODER_BUFFERS, *(s.prefix + key for s in specs.values() for key in s.tied)}


def normalise_keys(state: dict[str, torch.Tensor], architectures: list[str] | None = None, specs: Specs = HEADS
                   ) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename any HF BERT layout to ours. Returns (state, ignored keys that are not BERT's).

    ``architectures`` (config.json's) decides whose ``classifier.*`` keys they are
    (:func:`hf_owner` of ``classifier.``: ``token_classifier`` for ``BertForTokenClassification``,
    ``multiple_choice`` for ``BertForMultipleChoice``, else ``classifier``); raises ``ValueError`` when it
    names two such classes.
    """
    owners = {prefix: hf_owner(prefix, architectures, specs) for prefix in {s.hf_prefix for s in specs.values()}}
    ours = tuple(s.prefix for s in specs.values())
    derived = _derived(specs)
    out: dict[str, torch.Tensor] = {}
    ignored: list[str] = []
    for key, value in state.items():
        name = key[len("module."):] if key.startswith("module.") else key
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if name.startswith(_ENCODER_PARTS):
            name = "bert." + name
        if name == "cls.predictions.decoder.bias":
            out.setdefault("cls.predictions.bias", value)  # tied to cls.predictions.bias in HF
            continue
        if name in derived:
            continue
        for hf_prefix, owner in owners.items():
            if name.startswith(hf_prefix) and specs[owner].prefix != hf_prefix:
                name = specs[owner].prefix + name[len(hf_prefix):]
                break
        if name.startswith(("bert.", *ours)):
            out[name] = value
        else:
            ignored.append(key)
    return out, ignored


def hf_owner(hf_prefix: str, architectures: list[str] | None, specs: Specs = HEADS) -> str:
    """The head whose weights transformers stores under ``hf_prefix``: the one of the classes in
    ``architectures`` that has such a head, else the head whose own prefix it is. ``ValueError`` when
    the classes name two heads for it."""
    table = hf_classes(specs)
    names = [a for a in architectures or () if isinstance(a, str) and a in table]
    _refuse_shared_keys(names, "config.json lists", specs)
    heads = [h for name in names for h in table[name][0] if specs[h].hf_prefix == hf_prefix]
    if heads:
        return heads[0]
    sharing = [s.name for s in specs.values() if s.hf_prefix == hf_prefix]
    return next((h for h in sharing if specs[h].prefix == hf_prefix), sharing[0])


def _refuse_shared_keys(names: list[str], context: str, specs: Specs) -> None:
    """``ValueError`` when two of the classes keep different heads under the same HF keys (``classifier.*``)."""
    table = hf_classes(specs)
    owner: dict[str, tuple[str, str]] = {}
    for name in names:
        for head in table[name][0]:
            prefix = specs[head].hf_prefix
            if prefix in owner and owner[prefix][1] != head:
                raise ValueError(f"{context} {owner[prefix][0]} and {name}, whose heads are both stored as "
                                 f"{prefix}* in transformers; one checkpoint holds only one of them (name one "
                                 f"class in architectures)")
            owner.setdefault(prefix, (name, head))


def detect_heads(state: dict[str, torch.Tensor], specs: Specs = HEADS) -> tuple[tuple[str, ...], bool]:
    """Which heads of ``specs`` a normalised state dict has, and whether it has the pooler."""
    heads = tuple(s.name for s in specs.values() if any(k.startswith(s.prefix) for k in state))
    has_pooler = "bert.pooler.dense.weight" in state
    return heads, has_pooler


def architectures_for(heads: tuple[str, ...], specs: Specs = HEADS) -> list[str]:
    """The ``transformers`` classes a model with these heads is exported as (first = primary): a joint
    class (``BertForPreTraining``) for heads it carries together, then each other head's own class."""
    rest = [h for h in specs if h in heads]
    names: list[str] = []
    for name, members in _joint_classes(specs).items():
        if all(h in rest for h in members):
            names.append(name)
            rest = [h for h in rest if h not in members]
    return names + [specs[h].hf_class for h in rest] or ["BertModel"]


def classes_that_load(architectures: list[str], num_labels: int, specs: Specs = HEADS
                      ) -> tuple[list[str], list[str], int]:
    """Which of ``architectures`` transformers loads from one ``config.json``: (those that load, those that
    do not, the ``num_labels`` that file gets).

    transformers sizes some heads by ``num_labels`` (``HeadSpec.hf_num_labels``: QA's ``qa_outputs`` has 2
    outputs). With a labelled head (sequence or token classification) among the classes, ``num_labels`` is
    that head's, and a class with a head of another fixed size does not load (a 17-label tagger's file
    cannot also be a ``BertForQuestionAnswering``); without one, the file gets the fixed size."""
    table = hf_classes(specs)
    heads = [specs[h] for name in architectures for h in table[name][0]]
    if not any(spec.labelled for spec in heads):
        fixed = [spec.hf_num_labels for spec in heads if spec.hf_num_labels is not None]
        num_labels = fixed[0] if fixed else num_labels
    loads = [name for name in architectures
             if all(specs[h].hf_num_labels in (None, num_labels) for h in table[name][0])]
    return loads, [name for name in architectures if name not in loads], num_labels


def hf_key(key: str, specs: Specs = HEADS) -> str:
    """Our state-dict key under transformers' name: ``token_classifier.weight`` -> ``classifier.weight``."""
    for spec in specs.values():
        if key.startswith(spec.prefix):
            return spec.hf_prefix + key[len(spec.prefix):]
    return key


def export_state(state: dict[str, torch.Tensor], architectures: list[str], specs: Specs = HEADS
                 ) -> dict[str, torch.Tensor]:
    """The keys the given ``transformers`` classes expect together, from our state dict.

    One class gives an exact match (nothing missing or unexpected in ``from_pretrained``).
    ``BertModel`` alone is written without the ``bert.`` prefix, as ``transformers`` does; our
    ``token_classifier.*`` and ``multiple_choice.*`` become HF's ``classifier.*``. Two classes
    whose heads share those keys are refused with ``ValueError``.
    """
    table = hf_classes(specs)
    names = list(architectures)
    for name in names:
        if name not in table:
            raise ValueError(f"unknown architecture {name!r}; choose from {', '.join(table)}")
    _refuse_shared_keys(list(names), "cannot export both", specs)
    heads = {h for name in names for h in table[name][0]}
    pooler = any(table[name][1] for name in names)
    prefixes = tuple(specs[h].prefix for h in heads)
    derived = _derived(specs)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key in derived:
            continue
        if key.startswith("bert.pooler.") and not pooler:
            continue
        if key.startswith(("bert.", *prefixes)):
            out[hf_key(key, specs)] = value
    if names == ["BertModel"]:
        out = {key[len("bert."):]: value for key, value in out.items()}
    return out
