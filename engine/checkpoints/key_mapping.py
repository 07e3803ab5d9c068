"""Hugging Face BERT state-dict layouts <-> ours.

Our module names equal HF's ``BertFor*`` names (``bert.`` prefix, ``cls.predictions``,
``cls.seq_relationship``, ``qa_outputs``, ``classifier``), except two: HF calls the token-
classification and multiple-choice modules ``classifier`` too, and ours are ``token_classifier``
and ``multiple_choice``. ``config.json``'s ``architectures`` says which head a checkpoint's
``classifier.*`` keys are; one checkpoint holds at most one of the three.

Loading accepts every BERT layout: ``BertModel`` (no prefix), the task classes, DDP's
``module.`` prefix and the old TF-port ``gamma``/``beta`` LayerNorm names. Saving writes
exactly the keys the chosen ``transformers`` class expects, so it loads with nothing missing
or unexpected.
"""
from __future__ import annotations

import re

import torch

# architecture -> (heads it carries, whether its encoder has the pooler)
ARCHITECTURES: dict[str, tuple[tuple[str, ...], bool]] = {
    "BertForPreTraining": (("mlm", "nsp"), True),
    "BertForMaskedLM": (("mlm",), False),
    "BertForNextSentencePrediction": (("nsp",), True),
    "BertForQuestionAnswering": (("qa",), False),
    "BertForSequenceClassification": (("classifier",), True),
    "BertForTokenClassification": (("token_classifier",), False),
    "BertForMultipleChoice": (("multiple_choice",), True),
    "BertModel": ((), True),
}

# head -> its keys' prefix in our state dict, and in transformers' (HF names every classifier module `classifier`)
_HEAD_PREFIXES = {"mlm": "cls.predictions.", "nsp": "cls.seq_relationship.", "qa": "qa_outputs.",
                  "classifier": "classifier.", "token_classifier": "token_classifier.",
                  "multiple_choice": "multiple_choice."}
HF_PREFIXES = {**_HEAD_PREFIXES, "token_classifier": "classifier.", "multiple_choice": "classifier."}
_ENCODER_PARTS = ("embeddings.", "encoder.", "pooler.")
# Keys that carry no information of their own: buffers and the tied decoder weight.
_DERIVED = {"bert.embeddings.position_ids", "bert.embeddings.token_type_ids", "cls.predictions.decoder.weight"}


def normalise_keys(state: dict[str, torch.Tensor], architectures: list[str] | None = None
                   ) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename any HF BERT layout to ours. Returns (state, ignored keys that are not BERT's).

    ``architectures`` (config.json's) decides whose ``classifier.*`` keys they are
    (:func:`classifier_head`); raises ``ValueError`` when it names two such classes.
    """
    classifier = classifier_head(architectures)
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
        if name in _DERIVED:
            continue
        if name.startswith("classifier."):
            name = _HEAD_PREFIXES[classifier] + name[len("classifier."):]
        if name.startswith("bert.") or any(name.startswith(p) for p in _HEAD_PREFIXES.values()):
            out[name] = value
        else:
            ignored.append(key)
    return out, ignored


def classifier_head(architectures: list[str] | None) -> str:
    """Which of our heads HF's ``classifier.*`` keys belong to, by the classes in ``architectures``:
    ``token_classifier`` (``BertForTokenClassification``), ``multiple_choice`` (``BertForMultipleChoice``),
    else ``classifier`` (sequence classification, also when ``architectures`` is absent).
    Raises ``ValueError`` when two of these classes are listed."""
    names = [a for a in architectures or () if isinstance(a, str) and a in ARCHITECTURES]
    _refuse_shared_keys(names, "config.json lists")
    heads = [h for name in names for h in ARCHITECTURES[name][0] if HF_PREFIXES[h] == "classifier."]
    return heads[0] if heads else "classifier"


def _refuse_shared_keys(architectures: list[str], context: str) -> None:
    """``ValueError`` when two of the classes keep different heads under the same HF keys (``classifier.*``)."""
    owner: dict[str, tuple[str, str]] = {}
    for name in architectures:
        for head in ARCHITECTURES[name][0]:
            prefix = HF_PREFIXES[head]
            if prefix in owner and owner[prefix][1] != head:
                raise ValueError(f"{context} {owner[prefix][0]} and {name}, whose heads are both stored as "
                                 f"{prefix}* in transformers; one checkpoint holds only one of them (name one "
                                 f"class in architectures)")
            owner.setdefault(prefix, (name, head))


def detect_heads(state: dict[str, torch.Tensor]) -> tuple[tuple[str, ...], bool]:
    """Which heads a normalised state dict has, and whether it has the pooler."""
    heads = tuple(h for h, prefix in _HEAD_PREFIXES.items() if any(k.startswith(prefix) for k in state))
    has_pooler = "bert.pooler.dense.weight" in state
    return heads, has_pooler


def architectures_for(heads: tuple[str, ...]) -> list[str]:
    """The ``transformers`` classes a model with these heads is exported as (first = primary)."""
    names: list[str] = []
    if "mlm" in heads and "nsp" in heads:
        names.append("BertForPreTraining")
    elif "mlm" in heads:
        names.append("BertForMaskedLM")
    elif "nsp" in heads:
        names.append("BertForNextSentencePrediction")
    if "qa" in heads:
        names.append("BertForQuestionAnswering")
    if "classifier" in heads:
        names.append("BertForSequenceClassification")
    if "token_classifier" in heads:
        names.append("BertForTokenClassification")
    if "multiple_choice" in heads:
        names.append("BertForMultipleChoice")
    return names or ["BertModel"]


def hf_key(key: str) -> str:
    """Our state-dict key under transformers' name: ``token_classifier.weight`` -> ``classifier.weight``."""
    for head, prefix in _HEAD_PREFIXES.items():
        if key.startswith(prefix):
            return HF_PREFIXES[head] + key[len(prefix):]
    return key


def export_state(state: dict[str, torch.Tensor], architectures: list[str]) -> dict[str, torch.Tensor]:
    """The keys the given ``transformers`` classes expect together, from our state dict.

    One class gives an exact match (nothing missing or unexpected in ``from_pretrained``).
    ``BertModel`` alone is written without the ``bert.`` prefix, as ``transformers`` does; our
    ``token_classifier.*`` and ``multiple_choice.*`` become HF's ``classifier.*``. Two classes
    whose heads share those keys are refused with ``ValueError``.
    """
    for name in architectures:
        if name not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {name!r}; choose from {', '.join(ARCHITECTURES)}")
    _refuse_shared_keys(list(architectures), "cannot export both")
    heads = {h for name in architectures for h in ARCHITECTURES[name][0]}
    pooler = any(ARCHITECTURES[name][1] for name in architectures)
    prefixes = tuple(_HEAD_PREFIXES[h] for h in heads)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key in _DERIVED:
            continue
        if key.startswith("bert.pooler.") and not pooler:
            continue
        if key.startswith(("bert.", *prefixes)):
            out[hf_key(key)] = value
    if architectures == ["BertModel"]:
        out = {key[len("bert."):]: value for key, value in out.items()}
    return out
