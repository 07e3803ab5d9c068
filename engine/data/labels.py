"""Label names of a classification-style task (sequence or token classification) and their ids.

A file gives labels as names (``positive``, ``NOUN``, ``B-PER``) or as ids (``0``, ``1``). New labels
get ids in a fixed order (``label_names``): numerically when every label is an integer, else
alphabetically. When the model already has a head with named labels (its ``id2label``), a file
whose labels are all those names or integers reads the integers as that head's ids
(``as_label_names``), and an id outside the head's range is an error that says which ids exist.
"""
from __future__ import annotations

import re
from typing import Sequence

_INTEGER = re.compile(r"^[+-]?\d+$")


def label_names(labels: Sequence[str]) -> dict[int, str]:
    """``id2label`` for these labels: sorted numerically when all are integers, else as strings."""
    distinct = sorted(set(labels))
    if distinct and all(_INTEGER.match(label) for label in distinct):
        distinct = sorted(distinct, key=lambda label: (int(label), label))
    return dict(enumerate(distinct))


def as_label_names(labels: Sequence[str], id2label: dict[int, str] | None,
                   where: Sequence[str] | None = None) -> list[str]:
    """``labels`` with integer ids replaced by ``id2label``'s names, when ``id2label`` has names that are
    not integers and every label is one of those names or an integer; otherwise unchanged.

    ``where[i]`` (e.g. "data.csv, line 4") names label i in the ``ValueError`` for an id out of range.
    """
    if not id2label or all(_INTEGER.match(name) for name in id2label.values()):
        return list(labels)
    names = set(id2label.values())
    if not all(label in names or _INTEGER.match(label) for label in labels):
        return list(labels)
    resolved = []
    for i, label in enumerate(labels):
        if label in names:
            resolved.append(label)
            continue
        index = int(label)
        if index not in id2label:
            shown = ", ".join(f"{k} {v}" for k, v in sorted(id2label.items())[:12])
            place = f"{where[i]}: " if where is not None else ""
            raise ValueError(f"{place}label id {index} is out of range: the model's head has {len(id2label)} labels "
                             f"(ids {min(id2label)}..{max(id2label)}: {shown}); use one of those ids or names")
        resolved.append(id2label[index])
    return resolved


def check_known(labels: Sequence[str], label2id: dict[str, int], where: Sequence[str] | None = None) -> None:
    """``ValueError`` naming the first unknown labels (and where they are) when some are not in ``label2id``."""
    unknown: dict[str, str] = {}
    for i, label in enumerate(labels):
        if label not in label2id and label not in unknown:
            unknown[label] = where[i] if where is not None else ""
    if unknown:
        listed = ", ".join(f"{label!r}" + (f" ({place})" if place else "") for label, place in list(unknown.items())[:5])
        known = ", ".join(map(repr, list(label2id)[:20])) + (" ..." if len(label2id) > 20 else "")
        raise ValueError(f"unknown label(s) {listed}: the model's labels are {known}; fix the file or "
                         f"fine-tune a new head from a model without these labels")
