"""A task's own settings (``TaskDefinition.settings``, a dataclass) as command-line flags.

Each field becomes ``--field-name`` on the command line that offers the task (``python -m engine.pretrain``
for pretraining tasks, ``python -m engine.finetune`` for fine-tuning ones), in a group named after the task,
its help the field's ``metadata["help"]`` and its default (``metadata["metavar"]``: the value's name in
``--help``); its value goes into ``JobSpec.task_settings``. So a
new task with settings needs no edit here, in ``training_flags.py``, ``cli.py`` or in either command line.
"""
from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterable
from typing import Any

from engine.training.tasks.registry import TRAINING_TASKS, TaskDefinition


def flag(name: str) -> str:
    """The flag of a setting: ``min_words`` -> ``--min-words``."""
    return "--" + name.replace("_", "-")


def setting_fields(tasks: Iterable[TaskDefinition] | None = None) -> dict[str, list[tuple[TaskDefinition, Any]]]:
    """Setting name -> [(task, its dataclass field)] over ``tasks`` (default: every registered task)."""
    found: dict[str, list[tuple[TaskDefinition, Any]]] = {}
    for definition in TRAINING_TASKS.values() if tasks is None else tasks:
        if definition.settings is not None:
            for f in dataclasses.fields(definition.settings):
                found.setdefault(f.name, []).append((definition, f))
    return found


def setting_flags() -> dict[str, str]:
    """Setting name -> its flag, for every registered task's settings (messages name the flag the user typed)."""
    return {name: flag(name) for name in setting_fields()}


def value_type(kind: type, name: str) -> Any:
    """The type a setting's text is read as: its annotation, without ``| None``."""
    hint = typing.get_type_hints(kind).get(name, str)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def add_task_settings(parser: argparse.ArgumentParser, tasks: Iterable[TaskDefinition]) -> None:
    """One flag per setting of ``tasks``, in a group per task ("<task> settings"); a setting several tasks
    share is one flag. ``ValueError`` when a setting's flag is the command line's own."""
    own = {option for action in parser._actions for option in action.option_strings}
    added: set[str] = set()
    for definition in tasks:
        if definition.settings is None:
            continue
        group = parser.add_argument_group(f"{definition.name} settings")
        for f in dataclasses.fields(definition.settings):
            if f.name in added:
                continue
            if flag(f.name) in own:
                raise ValueError(f"task {definition.name}'s setting {f.name} is the command line's own {flag(f.name)}")
            added.add(f.name)
            sharing = [d.name for d, _ in setting_fields(tasks)[f.name]]
            default = f.default if f.default is not dataclasses.MISSING else None
            text = f"{', '.join(sharing)}: {f.metadata.get('help', f.name)}"
            text += f" (default {default})" if default is not None else ""
            kind = value_type(definition.settings, f.name)
            if kind is bool:
                group.add_argument(flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                                   help=text.replace("%", "%%"))
            else:
                group.add_argument(flag(f.name), dest=f.name, type=kind, default=None, help=text.replace("%", "%%"),
                                   metavar=f.metadata.get("metavar"))


def task_settings(args: argparse.Namespace, parser: argparse.ArgumentParser, definition: TaskDefinition,
                  offered: Iterable[TaskDefinition]) -> dict[str, Any]:
    """The settings of ``definition`` given on the command line (name -> value); a setting of another of the
    ``offered`` tasks given ends the program naming the tasks it is for (exit 2)."""
    own = {f.name for f in dataclasses.fields(definition.settings)} if definition.settings is not None else set()
    given: dict[str, Any] = {}
    for name, owners in setting_fields(offered).items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if name not in own:
            parser.error(f"{flag(name)} is for task {' or '.join(d.name for d, _ in owners)}, not {definition.name}")
        given[name] = value
    return given
