"""The run browser (the Training tab's *Watch a run*): its figures are the Training and Fine-tune tabs' own,
its state follows the rules of ``explorer/runs/watch_status.py``, a tick sends only what moved, and damaged or
forged runs are said, never raised."""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import gradio as gr
import pytest

from engine.training.runs.run_catalog import RunSummary
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import append_metrics
from engine.training.worker.run_state import RunState
from explorer.finetune import plots as fp
from explorer.finetune.tasks import finetune_rows
from explorer.models.registry import checkpoint_label
from explorer.runs import plots as tp
from explorer.runs.watch import CHECKPOINT_COLUMNS, NO_RUN, RunWatcher, watch_update
from explorer.runs.watch_curves import RunCurves
from explorer.runs.watch_plots import FIGURES, browser_figures
from explorer.runs.watch_status import QUIET_S, WatchFacts, quiet_window, watch_markdown, watched_state
from support.damage_helpers import unreadable
from support.probing_helpers import write_run

TRAIN = [{"kind": "train", "step": s, "mlm_loss": 6.0 - s, "nsp_loss": 0.7, "mlm_acc": 0.1 * s, "nsp_acc": 0.5,
          "loss": 6.7 - s, "lr": 1e-3, "grad_norm": 2.0, "tokens_per_s": 1000.0, "elapsed": 0.5 * s}
         for s in (1, 2, 3)]
EVAL = {"kind": "eval", "step": 3, "eval_mlm_loss": 3.1, "eval_mlm_acc": 0.3, "eval_nsp_loss": 0.69,
        "eval_nsp_acc": 0.5}


def _summary(step: int = 3, total: int | None = 6, checkpoints: int = 1, task: str | None = "pretraining",
             problems: tuple[str, ...] = ()) -> RunSummary:
    return RunSummary("cli-run", Path("/srv/secret/runs/cli-run"), checkpoints, step, total, task, None, 100.0,
                      problems)


def _clock() -> itertools.count:
    """A watcher clock that moves 10 s per look, so every tick reads the files again."""
    return itertools.count(0, 10)


def _watcher(root: Path) -> RunWatcher:
    return RunWatcher(root, clock=_clock().__next__)


def _json(figures: list) -> list[dict]:
    return [f.to_plotly_json() for f in figures]


# --- figures ---------------------------------------------------------------------------------

def run_figures(records: list[dict], task: str | None) -> list:
    """The run browser's figures of one run, unsmoothed."""
    return browser_figures([RunCurves("run", records)], task)


def test_a_pretraining_run_is_drawn_by_the_training_tabs_own_builders() -> None:
    records = [*TRAIN, EVAL]
    expected = [tp.mlm_loss_figure(records), tp.nsp_loss_figure(records), tp.accuracy_figure(records),
                tp.lr_figure(records)]
    assert _json(run_figures(records, "pretraining")) == _json(expected)
    assert _json(run_figures(records, None)) == _json(expected)              # an old run without a task
    assert len(expected) == FIGURES


def test_a_fine_tuning_run_is_drawn_by_the_fine_tune_tabs_builders() -> None:
    row = finetune_rows()["classification"]
    records = [{"kind": "train", "step": s, "loss": 1.0 / s, "classification_loss": 1.0 / s, "accuracy": 0.5,
                "lr": 1e-4, "grad_norm": 1.5} for s in (1, 2)] + [
        {"kind": "eval", "step": 2, "eval_classification_loss": 0.6, "eval_accuracy": 0.7}]
    loss, metrics, lr, grad = run_figures(records, "classification")
    assert _json([loss, metrics, lr]) == _json([fp.loss_figure(records, row.eval_loss),
                                                fp.metric_figure(records, row.metrics), tp.lr_figure(records)])
    assert list(grad.data[0].x) == [1, 2] and list(grad.data[0].y) == [1.5, 1.5]


def test_values_that_are_not_numbers_are_left_out_of_a_curve() -> None:
    records = [{"kind": "train", "step": 1, "mlm_loss": "abc"}, {"kind": "train", "step": 2, "mlm_loss": [1]},
               {"kind": "train", "step": 3, "mlm_loss": True}, {"kind": "train", "step": 4, "mlm_loss": 2.5}]
    [trace] = tp.mlm_loss_figure(records).data
    assert (list(trace.x), list(trace.y)) == ([4], [2.5])


# --- state and status ------------------------------------------------------------------------

@pytest.mark.parametrize("summary, latest, since_write, state", [
    (_summary(), {"train": TRAIN[-1]}, 5.0, RunState.RUNNING),
    (_summary(), {"train": TRAIN[-1]}, QUIET_S + 1, RunState.STOPPED),
    (_summary(step=0, checkpoints=0, total=None), {}, 5.0, RunState.PREPARING),
    (_summary(step=3, total=3), {"train": TRAIN[-1]}, 5.0, RunState.FINISHED),           # just wrote its last
    (_summary(step=3, total=3), {"train": {**TRAIN[-1], "step": 4}}, 5.0, RunState.RUNNING),  # resumed, larger total
    (_summary(), {"train": TRAIN[-1], "diverged": {"kind": "diverged", "step": 4}}, 5.0, RunState.DIVERGED),
    (_summary(), {"train": TRAIN[-1]}, None, RunState.STOPPED),                          # nothing ever written
])
def test_the_state_is_read_from_what_the_run_wrote(summary, latest, since_write, state) -> None:
    now = 10_000.0
    facts = WatchFacts(summary, latest, None if since_write is None else now - since_write, 3, 3)
    assert watched_state(facts, now) == state
    assert f"**{state}**" in watch_markdown(facts, now)


def test_a_slow_run_gets_a_longer_quiet_window() -> None:
    assert quiet_window({"step": 10, "elapsed": 3000.0}, 10) == 900.0       # 300 s between logged steps, times 3
    assert quiet_window({"step": 10, "elapsed": 1.0}, 10) == QUIET_S
    assert quiet_window({"step": 10, "elapsed": "x"}, 10) == quiet_window(None, 0) == QUIET_S
    slow = WatchFacts(_summary(), {"train": {**TRAIN[-1], "elapsed": 3000.0}}, 0.0, 10, 10)
    assert watched_state(slow, 600.0) == RunState.RUNNING and watched_state(slow, 901.0) == RunState.STOPPED


def test_the_status_names_no_server_path_and_says_what_is_damaged() -> None:
    facts = WatchFacts(_summary(problems=("checkpoints cannot be read at /srv/secret/runs/cli-run/checkpoints",)),
                       {"train": TRAIN[-1]}, 0.0, 3, 3, skipped=2, first_problem="line 4: it is not valid JSON",
                       unreadable="metrics.jsonl cannot be read (Permission denied)", own_run=True)
    text = watch_markdown(facts, 1.0)
    assert "/srv/secret" not in text and "…/checkpoints" in text
    assert "2 damaged lines of metrics.jsonl skipped (line 4: it is not valid JSON)" in text
    assert "metrics.jsonl cannot be read (Permission denied)" in text and "app's own run" in text
    assert "mlm_loss 3" in text and "nsp_loss 0.7" in text and "read only" in text


# --- the tick --------------------------------------------------------------------------------

@pytest.fixture
def runs(tmp_path: Path, tiny_tokenizer) -> Path:
    root = tmp_path / "runs"
    write_run(root, tiny_tokenizer, steps=(2,), run="cli-run")
    RunFolder(root / "cli-run").write_spec({"task": "pretraining"})
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
