"""``engine.training.jobs.task_flags``: a task's own settings (a dataclass) become flags, in a group named after the
task, typed from the annotations; a clash with the command line's own flag is refused."""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

import pytest

from engine.training.jobs.task_flags import add_task_settings, flag, setting_flags, task_settings
from engine.training.tasks.finetuning import CLASSIFICATION
from engine.training.tasks.registry import registered


@dataclass(frozen=True)
class Knobs:
    window: int = field(default=8, metadata={"help": "words per window"})
    ratio: float | None = None
    lower: bool = False


def test_each_setting_is_a_typed_flag_in_its_tasks_group() -> None:
    toy = dataclasses.replace(CLASSIFICATION, name="toy_knobs", settings=Knobs)
    parser = argparse.ArgumentParser()
    add_task_settings(parser, [CLASSIFICATION, toy])
    assert flag("max_words") == "--max-words"
    text = " ".join(parser.format_help().split())
    assert "toy_knobs settings:" in text and "--window WINDOW toy_knobs: words per window (default 8)" in text
    args = parser.parse_args(["--window", "3", "--ratio", "0.5", "--lower"])
    assert (args.window, args.ratio, args.lower) == (3, 0.5, True)
    assert task_settings(args, parser, toy, [toy]) == {"window": 3, "ratio": 0.5, "lower": True}
    with registered(toy):
        assert setting_flags()["window"] == "--window"
    with pytest.raises(SystemExit):                       # a setting of another task
        task_settings(args, parser, CLASSIFICATION, [CLASSIFICATION, toy])


def test_a_setting_named_like_the_command_lines_own_flag_is_refused() -> None:
    toy = dataclasses.replace(CLASSIFICATION, name="toy_knobs", settings=Knobs)
    parser = argparse.ArgumentParser()
    parser.add_argument("--window")
    with pytest.raises(ValueError, match="toy_knobs's setting window is the command line's own --window"):
        add_task_settings(parser, [toy])
