"""A model key as a value (explorer/models/keys.py): the spelling docs/ARCHITECTURE.md gives (``default``, ``live``,
``checkpoint:<run>/<step-dir>``, ``local:<folder>``, ``hub:<owner/name>``) parsed into a kind and a reference and
written back unchanged, what a checkpoint key names, and the checks on what a user typed."""
from __future__ import annotations

import pytest

from explorer.models.keys import DEFAULT, LIVE, MAX_SOURCE_CHARS, KeyKind, ModelKey, usable_run_name


@pytest.mark.parametrize("text, kind, reference", [
    ("default", KeyKind.DEFAULT, ""),
    ("live", KeyKind.LIVE, ""),
    ("checkpoint:run-a/step-000300", KeyKind.CHECKPOINT, "run-a/step-000300"),
    ("local:models/mine", KeyKind.LOCAL, "models/mine"),
    ("local:/srv/models/mine", KeyKind.LOCAL, "/srv/models/mine"),           # a server path still parses
    ("hub:owner/name", KeyKind.HUB, "owner/name"),
    ("hub:a:b", KeyKind.HUB, "a:b"),                                          # only the first colon separates
    ("checkpoint:", KeyKind.CHECKPOINT, ""),                                  # empty: the registry says why
    ("tiny test model", KeyKind.NAME, "tiny test model"),                    # a pinned model's name
    ("owner/name", KeyKind.NAME, "owner/name"),                              # the registry reads it as a hub id
    ("github:owner/name", KeyKind.NAME, "github:owner/name"),                # not one of the prefixes
    ("Default", KeyKind.NAME, "Default"),                                    # keys are case-sensitive
])
def test_a_key_parses_into_kind_and_reference_and_reads_back_unchanged(text: str, kind: KeyKind,
                                                                       reference: str) -> None:
    key = ModelKey.parse(text)
    assert (key.kind, key.reference) == (kind, reference)
    assert str(key) == key.text == f"{key}" == text
    assert ModelKey.parse(key.text) == key and hash(ModelKey.parse(text)) == hash(key)      # a dict key


def test_the_constructors_spell_the_documented_keys() -> None:
    assert ModelKey.checkpoint("run-a", "step-000300").text == "checkpoint:run-a/step-000300"
    assert ModelKey.local("models/mine").text == "local:models/mine"
    assert ModelKey.hub("owner/name").text == "hub:owner/name"
    assert (DEFAULT.text, LIVE.text) == ("default", "live")
    assert KeyKind.HUB == "hub" and f"{KeyKind.CHECKPOINT}" == "checkpoint"       # reads as the plain word


def test_a_checkpoint_key_names_its_run_and_step_folder() -> None:
    key = ModelKey.checkpoint("run-a", "step-000300")
    assert (key.run, key.step_dir, key.is_checkpoint_name) == ("run-a", "step-000300", True)
    assert (ModelKey.hub("run-a/step-000300").run, DEFAULT.step_dir) == ("", "")   # only checkpoints have them
    for bad in ("checkpoint:../../etc/step-000001", "checkpoint:run-a/..", "checkpoint:run-a/step/more",
                "checkpoint:run-a/", "checkpoint:", "checkpoint:run-a/.hidden"):
        assert not ModelKey.parse(bad).is_checkpoint_name, bad
    assert not ModelKey.hub("run-a/step-000300").is_checkpoint_name


def test_run_names_that_can_be_part_of_a_key() -> None:
    assert usable_run_name("run-2024 (copy)") and usable_run_name("ünïcode")
    for bad in ("", ".", "..", "a/b", "tab\there", "x" * 256):
        assert not usable_run_name(bad), bad


def test_what_a_user_typed_is_checked_before_it_is_parsed() -> None:
    assert ModelKey.read("  hub:owner/name \n") == ModelKey.hub("owner/name")
    for text, message in [(None, "Choose a model"), ("   ", "Choose a model"),
                          ("x" * (MAX_SOURCE_CHARS + 1), "too long"), ("a\x00b", "control characters")]:
        with pytest.raises(ValueError, match=message):
            ModelKey.read(text)


def test_a_key_value_cannot_be_built_that_reads_back_as_another() -> None:
    with pytest.raises(ValueError, match="no reference"):
        ModelKey(KeyKind.LIVE, "x")
    for name in ("", "default", "hub:owner/name"):
        with pytest.raises(ValueError, match="not a plain name"):
            ModelKey(KeyKind.NAME, name)
