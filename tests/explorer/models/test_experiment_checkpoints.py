"""The model picker (``explorer/models/registry.py``) offers an experiment's arms as checkpoints named so a person
knows them, loads them by their key, and groups them as runs for the over-training views; Compare lists the same."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.models.registry import UnknownModelError
from support.probing_helpers import make_services, write_run

SCALE = "tiny-600-steps-1a2b3c4d"
ARM = f"experiments/bert-table8/{SCALE}/mix-100-0-0/seed-1/pretrain"
NAME = f"experiments:bert-table8:{SCALE}:mix-100-0-0:seed-1:pretrain"


def test_the_picker_lists_and_loads_an_arms_checkpoints(tmp_path: Path, tiny_tokenizer) -> None:
    runs = tmp_path / "runs"
    write_run(runs, tiny_tokenizer, steps=(2, 4), run="direct")
    write_run(runs, tiny_tokenizer, steps=(3,), run=ARM)
    registry = make_services(tiny_tokenizer, runs).registry()
    choices = {c.key: c for c in registry.choices() if c.kind == "checkpoint"}
    key = f"checkpoint:{NAME}/step-000003"
    assert set(choices) == {key, "checkpoint:direct/step-000002", "checkpoint:direct/step-000004"}
    assert choices[key].label.startswith("bert-table8 · mix-100-0-0 · seed 1 · tiny 600 steps · step 3")
    assert choices["checkpoint:direct/step-000004"].label.startswith("direct · step 4")     # as before
    assert registry.get(key).config.hidden_size > 0                                       # it loads, like any run's
    labels = {r.name: r.label for r in registry.runs()}
    assert labels[NAME].startswith("bert-table8 · mix-100-0-0 · seed 1") and labels["direct"].startswith("direct ·")
    assert [c.key for c in registry.run_checkpoints(run=NAME)] == [key]
    for forged in (f"checkpoint:experiments:bert-table8:{SCALE}:..:seed-1:pretrain/step-000003",
                   f"checkpoint:experiments:bert-table8:{SCALE}:mix-100-0-0:seed-1:gone/step-000003"):
        with pytest.raises(UnknownModelError):
            registry.get(forged)
