"""The run browser's watcher (``explorer/runs/watch/watcher.py``): a tick sends only what moved, a new run reaches
the list, a compared run is drawn, redrawn when it moves and said when gone, and damaged, gone or forged runs are
said, never raised."""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import gradio as gr
import pytest

from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import write_spec
from engine.training.runs.state import append_metrics
from explorer.models.choices import checkpoint_label
from explorer.runs.watch.plots import FIGURES, CurveView
from explorer.runs.watch.watcher import CHECKPOINT_COLUMNS, NO_RUN, RunWatcher, watch_update
from support.damage_helpers import unreadable
from support.probing_helpers import write_run
from support.watch_records import TRAIN, records as _records


def _clock() -> itertools.count:
    """A watcher clock that moves 10 s per look, so every tick reads the files again."""
    return itertools.count(0, 10)


def _watcher(root: Path) -> RunWatcher:
    return RunWatcher(root, clock=_clock().__next__)


# --- one run ---------------------------------------------------------------------------------

@pytest.fixture
def runs(tmp_path: Path, tiny_tokenizer) -> Path:
    root = tmp_path / "runs"
    write_run(root, tiny_tokenizer, steps=(2,), run="cli-run")
    write_spec(RunFolder(root / "cli-run"), {"task": "pretraining"})
    for record in TRAIN[:2]:
        append_metrics(root / "cli-run" / "metrics.jsonl", record)
    return root


def test_a_tick_sends_only_what_moved(runs: Path) -> None:
    watcher, skip = _watcher(runs), gr.skip()
    outputs, seen = watch_update(watcher, "cli-run", None)
    status, *figures, table, run_list = outputs
    assert "**running**" in status and "step **2**" in status
    assert [list(t.x) for t in figures[0].data] == [[1, 2]]
    assert list(table.columns) == CHECKPOINT_COLUMNS and table["checkpoint"].tolist() == ["step-000002"]
    assert table["in the model picker"].tolist() == [checkpoint_label(RunFolder(runs / "cli-run").checkpoints()[0])]
    assert [value for _, value in run_list.choices] == ["cli-run"]
    again, seen = watch_update(watcher, "cli-run", seen)
    assert all(o == skip for o in again)                                          # nothing moved: nothing sent
    append_metrics(runs / "cli-run" / "metrics.jsonl", TRAIN[2])
    status, *figures, table, run_list = watch_update(watcher, "cli-run", seen)[0]
    assert "step **3**" in status and [list(t.x) for t in figures[0].data] == [[1, 2, 3]]
    assert table == skip and run_list == skip                                     # no checkpoint, no run, came


def test_a_new_run_reaches_the_list_on_the_next_tick(runs: Path, tiny_tokenizer) -> None:
    watcher = _watcher(runs)
    _, seen = watch_update(watcher, None, None)
    write_run(runs, tiny_tokenizer, steps=(1,), run="later-run")
    *_, run_list = watch_update(watcher, None, seen)[0]
    assert [value for _, value in run_list.choices] == ["later-run", "cli-run"]     # newest first


def test_damaged_gone_and_forged_runs_are_said_not_raised(runs: Path, tiny_tokenizer, monkeypatch) -> None:
    write_run(runs, tiny_tokenizer, steps=(1,), run="locked")
    (runs / "broken").mkdir()
    (runs / "broken" / "checkpoints").mkdir()
    (runs / "broken" / "run.json").write_text("{not json")
    (runs / "broken" / "metrics.jsonl").write_bytes(json.dumps(TRAIN[0]).encode() + b"\n{oops\n")
    watcher = _watcher(runs)
    with unreadable(monkeypatch, runs / "locked"):
        labels = dict((value, label) for label, value in watcher.choices())
        assert "⚠ damaged: the server cannot read its folder" in labels["locked"]
        status = watch_update(watcher, "locked", None)[0][0]
        assert status.startswith("⚠️ the run locked cannot be used") and str(runs) not in status
    assert "⚠ damaged: run.json: it is not valid JSON" in labels["broken"]
    status, *figures, table, _ = watch_update(watcher, "broken", None)[0]
    assert "1 damaged line of metrics.jsonl skipped (line 2: it is not valid JSON)" in status
    assert "damaged: run.json: it is not valid JSON" in status and len(table) == 0
    (runs / "preparing").mkdir()                     # a run before its trainer made its checkpoints folder
    (runs / "uploads").mkdir()                       # not a run
    for forged in ("preparing", "uploads", "../cli-run", "..", "/etc", "no-such-run", "a\x00b"):
        status, *figures, table, _ = watch_update(watcher, forged, None)[0]
        assert status == "⚠️ there is no run of that name in the runs folder (yet); pick one from the list"
        assert len(figures) == FIGURES and len(table) == 0
    watch_update(watcher, "cli-run", None)
    os.rename(runs / "cli-run", runs.parent / "moved")
    assert "is gone" in watch_update(watcher, "cli-run", None)[0][0]
    assert watch_update(watcher, None, None)[0][0] == NO_RUN


# --- with a compared run ---------------------------------------------------------------------

@pytest.fixture
def compared_runs(tmp_path: Path, tiny_tokenizer) -> Path:
    root = tmp_path / "runs"
    for name, lrs in (("first", [1e-3, 5e-4, 2.5e-4]), ("second", [1e-3, 5e-4, 1e-3])):
        write_run(root, tiny_tokenizer, steps=(2,), run=name)
        write_spec(RunFolder(root / name), {"task": "pretraining"})
        for record in _records(lrs=lrs)[:2]:
            append_metrics(root / name / "metrics.jsonl", record)
    return root


def test_a_compared_run_is_drawn_redrawn_when_it_moves_and_said_when_gone(compared_runs: Path) -> None:
    watcher, skip = _watcher(compared_runs), gr.skip()
    (status, mlm, *_), seen = watch_update(watcher, "first", None, compare="second")
    assert "Compared with `second` (step 2)" in status
    assert [t.name for t in mlm.data] == ["first · train", "second · train"]
    again, seen = watch_update(watcher, "first", seen, compare="second")
    assert all(o == skip for o in again)                                          # nothing moved
    append_metrics(compared_runs / "second" / "metrics.jsonl", _records()[2])   # its lr rises again: 1e-3
    (status, mlm, _, _, lr, *_), seen = watch_update(watcher, "first", seen, compare="second")
    assert list(mlm.data[1].x) == [1, 2, 3] and [s.x0 for s in lr.layout.shapes] == [2]
    (_, mlm, *_), seen = watch_update(watcher, "first", seen, compare="second", view=CurveView(log_y=True))
    assert mlm.layout.yaxis.type == "log"                                        # a new view redraws
    (status, mlm, *_), _ = watch_update(watcher, "first", seen, compare="nowhere")
    assert "⚠️ compared run: there is no run of that name" in status and len(mlm.data) == 1
    (status, mlm, *_), _ = watch_update(watcher, "first", None, compare="first")  # itself: drawn once
    assert "Compared" not in status and len(mlm.data) == 1
