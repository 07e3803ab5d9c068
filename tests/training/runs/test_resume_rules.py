"""engine.training.runs.resume_rules: a resumed run may change only RESUMABLE_FIELDS, and the refusal names what
the user typed."""
from __future__ import annotations

import dataclasses

import pytest

from engine.training.loop.config import TrainingConfig
from engine.training.runs.resume_rules import RESUMABLE_FIELDS, check_resume_changes


def test_the_resumable_fields_are_training_settings():
    assert RESUMABLE_FIELDS <= {f.name for f in dataclasses.fields(TrainingConfig)}


def test_resume_rules_name_what_the_user_typed():
    check_resume_changes({"total_steps", "device"})
    with pytest.raises(ValueError, match=r"cannot change learning_rate when resuming a run; only checkpoint_every"):
        check_resume_changes({"learning_rate", "total_steps"})
    with pytest.raises(ValueError, match="cannot change --lr when resuming"):
        check_resume_changes(["learning_rate"], {"learning_rate": "--lr"})
