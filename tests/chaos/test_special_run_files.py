"""Issue 38, item 2: a named pipe or a link to /dev/zero in a runs folder or a model folder is never read. Every
reader (run records, metrics, checkpoint state, config, weights) answers at once that the file is not a regular
file, instead of blocking in open() or reading forever. Each call runs on a thread that must end within seconds,
so a regression fails here instead of hanging the suite."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from engine.checkpoints.weight_files import read_weights
from engine.model.config import BertConfig
from engine.training.runs.metrics_tail import MetricsHistory, MetricsTail
from engine.training.runs.records import Damaged
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import spec_record
from engine.training.runs.state import (
    INFO_FILE, STATE_FILE, read_checkpoint_info, read_checkpoint_record, read_metrics_file, read_training_state,
)

SPECIALS = ["pipe", "zero"]


def special(path: Path, kind: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "pipe":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


def promptly(call: Callable[[], Any], seconds: float = 10.0) -> Any:
    """``call()``'s result or exception, which must come within ``seconds`` (else the test fails, not hangs)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.parametrize("kind", SPECIALS)
def test_checkpoint_records_and_state(tmp_path, kind):
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000001"
    special(checkpoint / INFO_FILE, kind)
    record = promptly(lambda: read_checkpoint_record(checkpoint))
    assert isinstance(record, Damaged) and "not a regular file" in record.reason
    assert promptly(lambda: read_checkpoint_info(checkpoint)) == {}
    special(checkpoint / STATE_FILE, kind)
    with pytest.raises(ValueError):
        promptly(lambda: read_training_state(checkpoint))


@pytest.mark.parametrize("kind", SPECIALS)
def test_run_json_and_metrics(tmp_path, kind):
    run = RunFolder(tmp_path / "run")
    special(run.spec_path, kind)
    spec = promptly(lambda: spec_record(run))
    assert isinstance(spec, Damaged) and "not a regular file" in spec.reason
    special(run.metrics_path, kind)
    metrics = promptly(lambda: read_metrics_file(run.metrics_path))
    assert metrics.records == [] and "not a regular file" in metrics.first_problem
    tail = promptly(lambda: MetricsTail(run.metrics_path).read(MetricsHistory()))
    assert "not a regular file" in tail.problem


@pytest.mark.parametrize("kind", SPECIALS)
def test_model_folders(tmp_path, kind):
    folder = tmp_path / "model"
    special(folder / "config.json", kind)
    with pytest.raises(ValueError, match="not a regular file"):
        promptly(lambda: BertConfig.load(folder))
    special(folder / "model.safetensors", kind)
    with pytest.raises(ValueError, match="not a regular file"):
        promptly(lambda: read_weights(folder, meta=True))


def test_a_huge_record_is_refused_without_reading_it_all(tmp_path):
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000001"
    checkpoint.mkdir(parents=True)
    with open(checkpoint / INFO_FILE, "wb") as handle:       # sparse: 1 GB on paper, nothing on disk
        handle.truncate(1 << 30)
    record = promptly(lambda: read_checkpoint_record(checkpoint))
    assert isinstance(record, Damaged) and "larger than" in record.reason
    (checkpoint / INFO_FILE).write_text(json.dumps({"step": 1}))
    assert promptly(lambda: read_checkpoint_record(checkpoint)) is not None
