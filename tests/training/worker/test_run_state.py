"""engine.training.worker.run_state and errors: a run's states, the moves allowed between them, typed refusals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.errors import NoRunError, RunActiveError, RunEndedError
from engine.training.worker.run_state import TRANSITIONS, IllegalTransition, RunState, check_transition
from engine.training.worker.shared_state import LiveRun, WorkerStatus

ACTIVE = {"preparing", "running", "paused", "stopping"}
TERMINAL = {"stopped", "finished", "failed", "diverged"}


def test_states_are_their_strings_in_messages_and_json():
    assert RunState.RUNNING == "running" and RunState("paused") is RunState.PAUSED
    assert f"already {RunState.STOPPING}" == "already stopping" and str(RunState.FAILED) == "failed"
    assert json.dumps({"state": RunState.DIVERGED}) == '{"state": "diverged"}'
    assert {s.value for s in RunState} == {"idle"} | ACTIVE | TERMINAL
    with pytest.raises(ValueError):
        RunState("sleeping")


def test_kinds_of_state():
    assert {s.value for s in RunState if s.is_active} == ACTIVE
    assert {s.value for s in RunState if s.is_terminal} == TERMINAL
    assert {s.value for s in RunState if s.is_training} == {"running", "paused", "stopping"}
    assert {s.value for s in RunState if s.is_failure} == {"failed", "diverged"}
    assert not RunState.IDLE.is_active and not RunState.IDLE.is_terminal


def test_the_allowed_moves():
    assert set(TRANSITIONS) == set(RunState)
    assert {s.value for s in TRANSITIONS[RunState.IDLE]} == {"preparing"}
    assert {s.value for s in TRANSITIONS[RunState.PREPARING]} == {"running", "paused", "stopping"} | TERMINAL
    assert {s.value for s in TRANSITIONS[RunState.RUNNING]} == {"paused", "stopping"} | TERMINAL
    assert {s.value for s in TRANSITIONS[RunState.PAUSED]} == {"running", "stopping"} | TERMINAL
    assert {s.value for s in TRANSITIONS[RunState.STOPPING]} == TERMINAL          # no way back from Stop
    for state in RunState:
        assert not state.can_go_to(state)                                       # staying put is not a move
        if state.is_terminal:
            assert TRANSITIONS[state] == frozenset()                            # a new run is a new LiveRun
        if state.is_active:                                                     # a step in flight may end it any way
            assert all(state.can_go_to(end) for end in RunState if end.is_terminal)
    assert not RunState.IDLE.can_go_to(RunState.RUNNING)


def test_an_illegal_move_raises_and_leaves_the_state():
    assert check_transition(RunState.RUNNING, "paused") is RunState.PAUSED
    assert check_transition(RunState.PAUSED, RunState.PAUSED) is RunState.PAUSED    # a new message only
    with pytest.raises(IllegalTransition, match="a run cannot go from stopping to running"):
        check_transition(RunState.STOPPING, RunState.RUNNING)
    run = LiveRun(1, JobSpec({}), JobSpec({}).validate(), Path("runs/run-1"))
    assert run.state is RunState.PREPARING and run.message == "starting"
    run.move_to(RunState.RUNNING, "step 0 / 10")
    run.move_to(RunState.PAUSED, "paused at step 0")
    run.move_to(RunState.STOPPING, "stopping after the current step")
    with pytest.raises(IllegalTransition) as refused:
        run.move_to(RunState.PAUSED, "paused at step 1")
    assert (refused.value.current, refused.value.wanted) == (RunState.STOPPING, RunState.PAUSED)
    assert run.state is RunState.STOPPING and run.message == "stopping after the current step"
    run.move_to(RunState.STOPPED, "stopped at step 1")
    with pytest.raises(IllegalTransition, match="from stopped to preparing"):
        run.move_to(RunState.PREPARING, "starting")


def test_a_status_takes_plain_strings_and_checks_them():
    st = WorkerStatus("paused", "paused at step 3", outcome=None)
    assert st.state is RunState.PAUSED and st.active and st.state == "paused"
    ended = WorkerStatus("diverged", "loss is nan", outcome="diverged")
    assert ended.outcome is RunState.DIVERGED and not ended.active
    with pytest.raises(ValueError):
        WorkerStatus("asleep", "?")


def test_refusals_are_typed_value_errors_with_the_words_users_read():
    active = RunActiveError(RunState.RUNNING, "run-20250101-120000")
    assert str(active) == ("a training run is already running (run-20250101-120000); "
                           "stop it before starting another")
    assert isinstance(active, ValueError) and active.state is RunState.RUNNING
    none = NoRunError(RunState.IDLE)
    assert str(none) == "no run is training (the worker is idle); nothing to checkpoint" and none.state == "idle"
    ended = RunEndedError(RunState.FAILED, "the run failed at step 3: RuntimeError: boom")
    assert str(ended) == ("the run ended (failed) before the checkpoint was written: "
                          "the run failed at step 3: RuntimeError: boom")
    assert ended.run_message.endswith("boom") and isinstance(ended, ValueError)
