"""The states of a background training run and the moves between them, in one place.

A run begins ``preparing`` (the worker is ``idle`` before its first run), trains ``running`` and
``paused`` in turn, goes ``stopping`` on **Stop**, and ends in one terminal state: ``stopped`` (by
**Stop**), ``finished`` (its total steps), ``failed`` (an error) or ``diverged`` (a NaN/inf loss)::

    idle -> preparing -> running <-> paused;  preparing | running | paused -> stopping -> stopped
    preparing | running | paused | stopping -> finished | failed | diverged

``RunState`` is a ``StrEnum``: ``RunState.RUNNING == "running"`` and ``str()``, f-strings and JSON
give the bare value, so messages and API answers read exactly as plain strings did.
"""
from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    """One state of the worker's run (see the module docstring for the life cycle)."""

    IDLE = "idle"                # no run yet
    PREPARING = "preparing"      # reading the text, building the vocabulary, datasets and model
    RUNNING = "running"
    PAUSED = "paused"            # waiting between steps until resumed
    STOPPING = "stopping"        # finishing the current step, then saving a checkpoint
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"
    DIVERGED = "diverged"

    @property
    def is_active(self) -> bool:
        """A run is going on (it holds the worker: no other may start)."""
        return self in _ACTIVE

    @property
    def is_terminal(self) -> bool:
        """The run has ended (stopped, finished, failed or diverged)."""
        return self in _TERMINAL

    @property
    def is_training(self) -> bool:
        """Past preparation and not ended: the trainer exists (running, paused or stopping)."""
        return self in _TRAINING

    @property
    def is_failure(self) -> bool:
        """Ended by an error or a NaN/inf loss (there is an ``error`` to show)."""
        return self in (RunState.FAILED, RunState.DIVERGED)

    def can_go_to(self, other: RunState) -> bool:
        """Whether a run in this state may move to ``other`` (``TRANSITIONS``); staying put is not a move."""
        return other in TRANSITIONS[self]


_ACTIVE = frozenset({RunState.PREPARING, RunState.RUNNING, RunState.PAUSED, RunState.STOPPING})
_TERMINAL = frozenset({RunState.STOPPED, RunState.FINISHED, RunState.FAILED, RunState.DIVERGED})
_TRAINING = frozenset({RunState.RUNNING, RunState.PAUSED, RunState.STOPPING})

# Every allowed move. Any active state may end in any terminal one: a step in flight when Pause or Stop
# was pressed can still finish the run, fail or diverge. A terminal state is final (a new run is a new run).
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.IDLE: frozenset({RunState.PREPARING}),
    RunState.PREPARING: frozenset({RunState.RUNNING, RunState.PAUSED, RunState.STOPPING}) | _TERMINAL,
    RunState.RUNNING: frozenset({RunState.PAUSED, RunState.STOPPING}) | _TERMINAL,
    RunState.PAUSED: frozenset({RunState.RUNNING, RunState.STOPPING}) | _TERMINAL,
    RunState.STOPPING: _TERMINAL,
    **{state: frozenset() for state in _TERMINAL},
}


class IllegalTransition(RuntimeError):
    """A run was asked to move between two states ``TRANSITIONS`` does not connect (a bug, never user input)."""

    def __init__(self, current: RunState, wanted: RunState) -> None:
        super().__init__(f"a run cannot go from {current} to {wanted}")
        self.current, self.wanted = current, wanted


def check_transition(current: RunState, wanted: RunState) -> RunState:
    """``wanted`` as a ``RunState`` when the move from ``current`` is allowed (or stays put); else
    ``IllegalTransition``."""
    wanted = RunState(wanted)
    if wanted != current and not current.can_go_to(wanted):
        raise IllegalTransition(current, wanted)
    return wanted


__all__ = ["IllegalTransition", "RunState", "TRANSITIONS", "check_transition"]
