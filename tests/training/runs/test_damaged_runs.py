"""A damaged run folder is listed as damaged, with the reason and what to do; it never raises out of listing,
and the runs beside it are listed as before (issue 27)."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from engine.training.runs.run_catalog import checkpoints_newest_first, find_run, run_summaries
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import resume_spec
from engine.training.loop.config import TrainingConfig
from engine.training.runs.state import read_metrics, read_metrics_file, truncate_metrics
from support.damage_helpers import check_unreadable_works, unreadable, runs  # noqa: F401 (the fixture)
from support.probing_helpers import write_run


def state_file(root: Path, run: str, step: int) -> Path:
    return root / run / "checkpoints" / f"step-{step:06d}" / "explorer_state.json"


@pytest.mark.parametrize("change, reason", [
    ({"created": "yesterday"}, "created is 'yesterday', not a time"),
    ({"epoch": "x"}, "epoch is 'x', not a whole number of at least 0"),
    ({"epoch": 1e400}, "epoch is inf, not a whole number of at least 0"),
    ({"metrics": [1, 2]}, "metrics is a list, not an object"),
])
def test_a_damaged_checkpoint_record_is_listed_as_damaged(runs: Path, change: dict, reason: str) -> None:
    path = state_file(runs, "bad", 3)
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}).replace("Infinity", "1e400"))
    found = {(c.run.name, c.step): c for c in checkpoints_newest_first(runs)}
    assert sorted(found) == [("bad", 1), ("bad", 3), ("good", 2), ("good", 4)]
    damaged = found[("bad", 3)]
    assert damaged.damage == f"explorer_state.json: {reason}"
    assert (damaged.epoch, damaged.metrics, damaged.created) == (0, {}, 0.0)      # defaults, not the bad values
    assert found[("good", 4)].damage is None and found[("good", 4)].metrics == {"mlm_loss": 4.0}
    summary = {s.name: s for s in run_summaries(runs)}
    assert summary["bad"].problems == (f"step-000003: explorer_state.json: {reason}",)
    assert summary["bad"].label == (f"bad · step 3 · 2 checkpoints · ⚠ damaged: step-000003: explorer_state.json: "
                                    f"{reason}; Continue passes over a damaged checkpoint to the newest good one")
    assert summary["bad"].resumable and not summary["good"].problems


@pytest.mark.parametrize("raw", [b"", b"\xff\xfe", b'{"step": 3', b"[]", b"null"])
def test_an_unreadable_checkpoint_record_is_damage_not_an_error(runs: Path, raw: bytes) -> None:
    state_file(runs, "bad", 3).write_bytes(raw)
    damaged = next(c for c in RunFolder(runs / "bad").checkpoints() if c.step == 3)
    assert damaged.damage is not None and damaged.damage.startswith("explorer_state.json: it ")


def test_a_folder_the_server_cannot_read_is_listed_as_damaged(runs: Path, monkeypatch, tmp_path: Path) -> None:
    check_unreadable_works(monkeypatch, tmp_path / "probe")
    with unreadable(monkeypatch, runs / "bad"):
        assert [(c.run.name, c.step) for c in checkpoints_newest_first(runs)] == [("good", 4), ("good", 2)]
        summary = {s.name: s for s in run_summaries(runs)}
        assert summary["bad"].problems == ("the server cannot read its folder (Permission denied)",)
        assert summary["bad"].blocked and not summary["bad"].resumable
        assert summary["bad"].label.endswith("fix the folder's permissions or remove it")
        with pytest.raises(FileNotFoundError, match="the run bad cannot be used: the server cannot read its folder"):
            find_run(runs, "bad")
    with unreadable(monkeypatch, runs / "bad" / "checkpoints" / "step-000003"):
        assert [c.step for c in RunFolder(runs / "bad").checkpoints()] == [1]
        assert {s.name: s for s in run_summaries(runs)}["bad"].problems == (
            "step-000003 cannot be read (Permission denied)",)
    with unreadable(monkeypatch, runs):
        assert checkpoints_newest_first(runs) == [] and run_summaries(runs) == []


def test_damaged_metrics_lines_are_skipped_counted_and_logged(tmp_path: Path, caplog) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"kind": "train", "step": 1, "loss": 3.0}\n'
                     b'{"kind": "train", "step": 2, "loss": 2.\xff}\n'          # not UTF-8
                     b'{"kind": "train", "step": "abc"}\n'
                     b'[1, 2]\n'
                     b'{"kind": "eval", "step": 3.0, "mlm_acc": 0.5}\n'
                     b'{"kind": "train", "st')                                # torn by a crash: skipped silently
    found = read_metrics_file(path)
    assert [r["step"] for r in found.records] == [1, 3] and found.skipped == 3
    assert found.first_problem == "line 2: it is not UTF-8 text"
    with caplog.at_level(logging.WARNING):
        assert read_metrics(path) == found.records
    assert "metrics.jsonl: skipped 3 damaged lines (line 2: it is not UTF-8 text)" in caplog.text
    truncate_metrics(path, 2)                                   # a resume keeps the good records up to its step
    assert read_metrics(path) == [{"kind": "train", "step": 1, "loss": 3.0}]


def test_a_garbage_run_json_is_named_as_damaged_when_continuing(runs: Path) -> None:
    config = TrainingConfig(total_steps=8).to_dict()
    path = state_file(runs, "bad", 3)
    path.write_text(json.dumps({**json.loads(path.read_text()), "config": config}))
    (runs / "bad" / "run.json").write_bytes(b"\x00\x01garbage")
    summary = {s.name: s for s in run_summaries(runs)}["bad"]
    assert summary.problems == ("run.json: it is not valid JSON",)
    assert summary.blocked and summary.total_steps == 8 and not summary.resumable
    with pytest.raises(ValueError, match=r"the run bad is damaged \(run.json: it is not valid JSON\), so it cannot "
                                         "continue exactly; start a new run"):
        resume_spec(runs / "bad")
    (runs / "bad" / "run.json").write_text(json.dumps({"corpus": 5}))
    with pytest.raises(ValueError, match=r"run.json: corpus is 5, not text"):
        resume_spec(runs / "bad")
