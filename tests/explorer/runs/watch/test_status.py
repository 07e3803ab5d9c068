"""A watched run's state and status line (``explorer/runs/watch/status.py``): the state follows what the run
wrote, a slow run gets a longer quiet window, and the status names no server path and says what is damaged."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.training.runs.run_catalog import RunSummary
from engine.training.worker.run_state import RunState
from explorer.runs.watch.status import QUIET_S, WatchFacts, quiet_window, watch_markdown, watched_state
from support.watch_records import TRAIN


def _summary(step: int = 3, total: int | None = 6, checkpoints: int = 1, task: str | None = "pretraining",
             problems: tuple[str, ...] = ()) -> RunSummary:
    return RunSummary("cli-run", Path("/srv/secret/runs/cli-run"), checkpoints, step, total, task, None, 100.0,
                      problems)


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
