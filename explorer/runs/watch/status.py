"""What a watched run is doing, told from the files it writes (the Training tab's *Watch a run*).

A run trained by another process (a command line, torchrun, a job on a cluster sharing the runs folder) cannot
be asked how it is; its state (a ``RunState``) is read from what it wrote:

- **finished**: its newest checkpoint is at the run's total steps (the last step is always checkpointed) and
  nothing was logged past it;
- **diverged**: its newest record is a ``diverged`` one (a NaN or infinite loss ended it);
- **running**: its metrics (or its folder) changed within the quiet window, ``QUIET_S``, or three times its mean
  training time between two logged steps when that is longer (a slow model logs rarely);
  **preparing** the same before its first logged step;
- **stopped**: quiet for longer: stopped, killed or stuck; files cannot tell which.

Times are the files' modification times against the server's clock; a shared folder whose clock runs apart
from the app's shifts the window by that much. Pure functions: plain values in, Markdown out.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.checks import is_finite_number
from engine.training.runs.run_catalog import RunSummary
from engine.training.tasks.registry import TRAINING_TASKS
from engine.training.worker.run_state import RunState
from explorer.formatting import sig
from explorer.runs.status import duration
from explorer.ui_errors import shown

QUIET_S = 120.0          # a run that wrote nothing for longer than this (and 3 log intervals) is no longer running
QUIET_INTERVALS = 3      # ... counted in the training time between its last two logged steps

READ_ONLY = "read only: watched from its files (its own command line or job steers it)"
STATE_WORDS = {
    RunState.PREPARING: "its folder changed recently, but no step is logged yet",
    RunState.RUNNING: "its metrics are growing",
    RunState.FINISHED: "reached its total steps; its last checkpoint is in the model picker",
    RunState.DIVERGED: "the loss became NaN or infinite, so training stopped; earlier checkpoints are intact",
    RunState.STOPPED: "nothing written for a while: stopped, killed or stuck (files cannot tell which); "
                      "checkpoints are intact, and it shows as running again once it writes",
}


@dataclass(frozen=True)
class WatchFacts:
    """What a tick learnt about a watched run from its files."""

    summary: RunSummary                      # its listing: checkpoints, newest step, total, problems
    latest: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)   # record kind -> its newest record
    last_write: float | None = None          # newest modification time of its metrics or folder (epoch seconds)
    records: int = 0                         # good records read
    train_records: int = 0                   # of which train records
    skipped: int = 0                         # damaged metrics lines skipped
    first_problem: str | None = None         # the first of them ("line 4: it is not valid JSON")
    unreadable: str | None = None            # why metrics.jsonl cannot be read now
    own_run: bool = False                    # it is the app's own worker run


def quiet_window(train: Mapping[str, Any] | None, train_records: int) -> float:
    """Seconds without a write after which a run counts as stopped: ``QUIET_S``, or ``QUIET_INTERVALS`` times its
    mean training time between two logged steps (its newest record's ``elapsed`` over ``train_records``) when
    that is longer."""
    elapsed = (train or {}).get("elapsed")
    if train_records < 1 or not is_finite_number(elapsed) or elapsed <= 0:
        return QUIET_S
    return max(QUIET_S, QUIET_INTERVALS * float(elapsed) / train_records)


def watched_state(facts: WatchFacts, now: float) -> RunState:
    """The run's state as its files tell it (module docstring), at the time ``now`` (epoch seconds)."""
    summary, train = facts.summary, facts.latest.get("train")
    step = train.get("step", 0) if train else 0
    diverged = facts.latest.get("diverged")
    if diverged is not None and diverged.get("step", 0) >= step:
        return RunState.DIVERGED
    if summary.total_steps is not None and summary.checkpoints and summary.step >= summary.total_steps \
            and step <= summary.step:
        return RunState.FINISHED
    if facts.last_write is not None and now - facts.last_write <= quiet_window(train, facts.train_records):
        return RunState.RUNNING if train else RunState.PREPARING
    return RunState.STOPPED


def _numbers(summary: RunSummary, train: Mapping[str, Any]) -> str:
    """``mlm_loss 5.65 · nsp_loss 0.691 · 16,208 tokens/s``: what the run's command line prints for a step."""
    definition = TRAINING_TASKS.get(summary.task) if summary.task else None
    names = [name for name, _ in definition.shown] if definition is not None else ["loss"]
    parts = [f"{name} {sig(float(train[name]))}" for name in names if is_finite_number(train.get(name))]
    if is_finite_number(train.get("tokens_per_s")):
        parts.append(f"{float(train['tokens_per_s']):,.0f} tokens/s")
    if is_finite_number(train.get("elapsed")):
        parts.append(f"trained {duration(float(train['elapsed']))}")
    return " · ".join(parts)


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "never"


def watch_markdown(facts: WatchFacts, now: float) -> str:
    """The watched run's status: state and step, its latest numbers, what its state means, when it last wrote,
    and what is damaged (names only, never a server path)."""
    summary, train = facts.summary, facts.latest.get("train") or {}
    state = watched_state(facts, now)
    total = f" / {summary.total_steps:,}" if summary.total_steps else ""
    name = shown(summary.title or summary.name)           # an experiment's run: experiment · arm · seed
    lines = [f"**{state}** · step **{int(train.get('step', 0)):,}{total}** · run `{name}` · _{READ_ONLY}_"]
    numbers = _numbers(summary, train) if train else ""
    if numbers:
        lines.append(numbers)
    lines.append(f"_{STATE_WORDS[state]}_ — last written {_when(facts.last_write)}; {facts.records:,} records, "
                 f"{summary.checkpoints} checkpoint{'s' if summary.checkpoints != 1 else ''}")
    if facts.own_run:
        lines.append("This is the app's own run: its controls and live view are above.")
    if facts.unreadable:
        lines.append(f"⚠️ {shown(facts.unreadable)}")
    if facts.skipped:
        lines.append(f"⚠️ {facts.skipped:,} damaged line{'s' if facts.skipped != 1 else ''} of metrics.jsonl "
                     f"skipped ({shown(facts.first_problem or '')})")
    if summary.problems:
        lines.append(f"⚠️ damaged: {shown('; '.join(summary.problems))}")
    return "\n\n".join(lines)
