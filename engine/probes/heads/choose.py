"""Multiple choice: which of C choices goes with a context? As ``BertForMultipleChoice``.

``choose(loaded, context, choices)`` encodes one ``[CLS] context [SEP] choice [SEP]`` row per
choice (type ids 0 then 1; SWAG's layout, as ``transformers``' multiple-choice examples build it),
pads the rows to the longest (``padding=True``), runs the multiple-choice head on the
(1, C, S) batch and returns a :class:`ChooseResult`: one logit per choice and their softmax over
the choices. There is no ``transformers`` pipeline for this head; ``as_dicts()`` gives one
``{"index", "choice", "score", "logit"}`` per choice, in the order given.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.head_inputs import batch_tensors, check_text, encode_pairs

MIN_CHOICES = 2


@dataclass
class ChooseResult:
    """The multiple-choice head's scores for one context and its choices, in the order given."""

    context: str
    choices: list[str]
    source: str                     # which model (LoadedModel.source)
    tokens: list[list[str]]         # per choice: its row's pieces, unpadded, specials included
    logits: list[float]             # (C,)
    probabilities: list[float]      # softmax over the C choices

    @property
    def best(self) -> int:
        """The index of the most probable choice (the first of equal ones)."""
        return max(range(len(self.probabilities)), key=lambda i: (self.probabilities[i], -i))

    def as_dicts(self) -> list[dict[str, Any]]:
        """``[{"index", "choice", "score", "logit"}]``, one per choice, in the order given."""
        return [{"index": i, "choice": c, "score": p, "logit": z}
                for i, (c, p, z) in enumerate(zip(self.choices, self.probabilities, self.logits))]


def choose(loaded: LoadedModel, context: str, choices: Sequence[str]) -> ChooseResult:
    """Score each of ``choices`` (at least 2) as the continuation of ``context`` with the multiple-choice head.

    Raises ``ValueError`` without the head, for an empty context or choice, fewer than two choices, or a row
    longer than the model reads.
    """
    loaded.require_head("multiple_choice")
    check_text(context, "the context", "write the sentence the choices continue")
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise TypeError(f"choices must be a list of str, got {type(choices).__name__}")
    choices = list(choices)
    if len(choices) < MIN_CHOICES:
        raise ValueError(f"give at least {MIN_CHOICES} choices to choose between; got {len(choices)}")
    for i, choice in enumerate(choices, start=1):
        check_text(choice, f"choice {i}", "write a text for every choice, or remove it")
    encodings = encode_pairs(loaded, [(context, choice) for choice in choices],
                             [f"the context with choice {i}" for i in range(1, len(choices) + 1)])
    inputs = {name: t.unsqueeze(0) for name, t in batch_tensors(loaded, encodings).items()}   # (C, S) -> (1, C, S)
    with torch.inference_mode():
        logits = loaded.model(**inputs, compute=("multiple_choice",)).multiple_choice.logits.float()[0]   # (C,)
        probabilities = logits.softmax(-1)                              # (C,)
    return ChooseResult(context=context, choices=choices, source=loaded.source,
                        tokens=[list(e.shown) for e in encodings], logits=logits.tolist(),
                        probabilities=probabilities.tolist())
