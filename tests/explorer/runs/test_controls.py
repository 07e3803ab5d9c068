"""The run controls both tabs share (``explorer.runs.controls``): each of Pause / Resume / Stop / Save acts only in the
states the worker lets it change, greyed out elsewhere, and the row opens as the access policy says."""
from __future__ import annotations

import gradio as gr
import pytest

from engine.training.worker.run_state import RunState
from explorer.serving.access import AccessPolicy
from explorer.runs import controls

# What each button can act on, state by state (the worker's rules: engine/training/worker/training_worker.py).
CAN = {RunState.IDLE: (), RunState.PREPARING: ("pause", "stop"), RunState.RUNNING: ("pause", "stop", "save"),
       RunState.PAUSED: ("resume", "stop", "save"), RunState.STOPPING: (), RunState.STOPPED: (),
       RunState.FINISHED: (), RunState.FAILED: (), RunState.DIVERGED: ()}


@pytest.mark.parametrize("state", list(RunState))
def test_each_control_acts_only_where_the_run_can_change(state: RunState) -> None:
    assert set(RunState) == set(CAN)
    can = controls.allowed(state)
    assert list(can) == list(controls.STEERING) and {name for name, ok in can.items() if ok} == set(CAN[state])
    updates = controls.steering_updates(state)
    assert [u.interactive for u in updates] == [name in CAN[state] for name in controls.STEERING]
    assert not any(u.interactive for u in controls.steering_updates(state, enabled=False))   # public, no training


def test_without_a_state_the_shared_row_opens_as_before() -> None:
    """The Fine-tune tab builds the same row with no state: every control as the access policy says."""
    with gr.Blocks(analytics_enabled=False):
        row = controls.run_controls(AccessPolicy())
        closed = controls.run_controls(AccessPolicy(), RunState.FINISHED)
    assert all(b.interactive is not False for b in (row.start, *row.steering))
    assert [b.interactive for b in closed.steering] == [False] * 4 and closed.start.interactive is not False
