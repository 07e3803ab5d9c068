"""The Fine-tune form's fields for the tasks' own settings, made from their settings dataclasses.

A task's settings (``TaskDefinition.settings``, e.g. QA's ``doc_stride`` and ``max_question_len``, multiple
choice's ``num_choices``) are one text box each, labelled from the field's name, its ``metadata["help"]`` under
it, shown while the task is chosen. An empty box takes the row's value for the run's sequence length
(``FinetuneTask.settings``: QA's windows are a quarter of it) or else the dataclass default, which the box shows
in grey; a value is read as the field's type. A setting several tasks share is one box. So a new task's setting
appears in the form and in ``/finetune_start``'s parameters with no edit of the tab.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import gradio as gr

from engine.training.jobs.task_flags import value_type
from explorer.finetune.tasks import FinetuneTask

TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class SettingField:
    """One setting's box: the field's name (its API parameter), label, help, type and the tasks that have it."""

    name: str
    label: str
    help: str
    kind: type
    tasks: tuple[str, ...]


def setting_fields(rows: Mapping[str, FinetuneTask]) -> dict[str, SettingField]:
    """Name -> field of every setting of the ``rows``' tasks, in the rows' and the dataclasses' order."""
    found: dict[str, SettingField] = {}
    for row in rows.values():
        kind = row.definition.settings
        for f in dataclasses.fields(kind) if kind is not None else ():
            known = found.get(f.name)
            tasks = (known.tasks if known else ()) + (row.name,)
            found[f.name] = SettingField(f.name, known.label if known else f.name.replace("_", " ").capitalize(),
                                         known.help if known else f.metadata.get("help", ""),
                                         value_type(kind, f.name), tasks)
    return found


def empty_values(row: FinetuneTask, seq_length: int | None = None) -> dict[str, Any]:
    """What each of ``row``'s settings is when its box is empty: the row's value for ``seq_length`` (default: the
    row's), else the dataclass default."""
    kind = row.definition.settings
    if kind is None:
        return {}
    chosen = row.settings(int(seq_length if seq_length is not None else row.defaults["seq_length"]))
    return {f.name: chosen.get(f.name, f.default) for f in dataclasses.fields(kind)}


def placeholder(row: FinetuneTask, name: str) -> str:
    """The grey text of ``name``'s box for ``row``: the value an empty box takes at the row's sequence length."""
    value = empty_values(row).get(name)
    return "" if value is None or value is dataclasses.MISSING else str(value)


def boxes(fields: Mapping[str, SettingField], first: FinetuneTask) -> dict[str, Any]:
    """The settings' text boxes in one row (inside the current Blocks), those of ``first``'s task visible."""
    if not fields:
        return {}
    with gr.Row():
        return {name: gr.Textbox("", label=f.label, info=f.help, placeholder=placeholder(first, name), max_lines=1,
                                 visible=first.name in f.tasks, elem_classes=["finetune-setting"])
                for name, f in fields.items()}


def box_updates(fields: Mapping[str, SettingField], row: FinetuneTask) -> list[Any]:
    """The boxes when ``row``'s task is chosen: its settings shown and emptied (their grey values its own)."""
    return [gr.Textbox(value="", visible=row.name in f.tasks, placeholder=placeholder(row, name))
            for name, f in fields.items()]


def _typed(text: str, field: SettingField) -> Any:
    """The box's text as the setting's type; ValueError naming the box."""
    if field.kind is bool:
        if text.lower() in TRUE + FALSE:
            return text.lower() in TRUE
        raise ValueError(f"{field.label} must be true or false, got {text!r}")
    if field.kind not in (int, float):
        return field.kind(text)
    words = "a whole number" if field.kind is int else "a number"
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{field.label} must be {words}, got {text!r}") from None
    if not math.isfinite(number) or (field.kind is int and not number.is_integer()):
        raise ValueError(f"{field.label} must be {words}, got {text!r}")
    return int(number) if field.kind is int else number


def settings_values(fields: Mapping[str, SettingField], row: FinetuneTask, given: Mapping[str, Any],
                    seq_length: int, example: Any = None) -> dict[str, Any]:
    """``JobSpec.task_settings`` for ``row``'s task: each of its settings from its box when it is filled, else
    the chosen bundled example's value (``BundledExample.settings``), else its empty value for ``seq_length``
    (boxes of other tasks' settings are ignored); ValueError naming a box whose text is not of the setting's
    type."""
    values = {**empty_values(row, seq_length), **(example.settings if example is not None else {})}
    for name in values:
        text = given.get(name)
        if text is not None and str(text).strip():
            values[name] = _typed(str(text).strip(), fields[name])
    return {name: value for name, value in values.items() if value is not dataclasses.MISSING}


def labels(fields: Mapping[str, SettingField]) -> dict[str, str]:
    """Setting name -> its box's label, for messages (``JobSpec.validate``'s ``names``)."""
    return {name: f.label for name, f in fields.items()}
