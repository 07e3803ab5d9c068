"""Issue 38, item 7: downloads. Ten simultaneous exports of one checkpoint all succeed with a whole zip (each
writes its own temporary file and renames it in); a checkpoint whose weights are truncated is listed as damaged,
left out of the model picker and refused for download with a sentence."""
from __future__ import annotations

import threading
import zipfile

import pytest
import torch

from engine.model.heads import BertWithHeads
from engine.training.runs.export import export_zip
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import write_checkpoint
from explorer.models.registry import ModelRegistry


@pytest.fixture
def checkpoint(tmp_path, make_config, tiny_tokenizer):
    torch.manual_seed(0)
    path = tmp_path / "runs" / "demo" / "checkpoints" / "step-000002"
    write_checkpoint(BertWithHeads(make_config()), tiny_tokenizer, path, {"format": 1, "step": 2},
                     {"step": 2, "epoch": 0, "metrics": {}, "created": 1.0, "config": {}})
    return path


def test_ten_simultaneous_exports_all_get_a_whole_zip(checkpoint, tmp_path):
    results, errors = [], []

    def export() -> None:
        try:
            results.append(export_zip(checkpoint, tmp_path / "exports"))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=export) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and len(results) == 10 and len(set(results)) == 1
    with zipfile.ZipFile(results[0]) as archive:
        assert archive.testzip() is None and "model.safetensors" in archive.namelist()
    assert [p.name for p in (tmp_path / "exports").iterdir()] == [results[0].name], "no partial file is left"


def test_truncated_weights_are_listed_as_damaged_and_never_served(checkpoint, tmp_path):
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    [info] = RunFolder(checkpoint.parent.parent).checkpoints()
    assert not info.loadable and "weights cannot be read" in info.weights_damage
    with pytest.raises(ValueError, match="step-000002 is damaged: its weights cannot be read"):
        export_zip(checkpoint, tmp_path / "exports")
    registry = ModelRegistry(runs_root=tmp_path / "runs", default_dir=None)
    assert [c.key for c in registry.choices() if c.kind == "checkpoint"] == []
