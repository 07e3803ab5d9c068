"""The Training tab's controls act on what they can, at once (the states each acts in:
``tests/explorer/runs/test_controls.py``): Pause / Resume / Stop / Save open greyed out with no run and the tick
keeps them so, pressing Pause / Resume / Stop says so in the status before the worker answers, a refused Start
leaves the status as it was, and the learning-rate and masking-rate fields step by sensible amounts within their
ranges (a step of 1 turned 0.0005 into 1)."""
from __future__ import annotations

import json
from typing import Any

import gradio as gr
import pytest

from engine.training.worker.run_state import RunState
from explorer.services import Services
from explorer.runs import controls, fields
from explorer.training import tab as training_tab
from explorer.training.live import LIVE_OUTPUTS

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def built(services: Services) -> tuple[gr.Blocks, dict[str, Any]]:
    widgets: dict[str, Any] = {}
    with gr.Blocks(analytics_enabled=False) as demo:
        widgets.update(training_tab.build(services))
    return demo, widgets


def _button(demo: gr.Blocks, label: str) -> gr.Button:
    return next(b for b in demo.blocks.values() if isinstance(b, gr.Button) and b.value == label)


def test_the_buttons_open_as_the_run_is_and_the_tick_keeps_them_so(services: Services,
                                                                   built: tuple[gr.Blocks, dict]) -> None:
    demo, _ = built
    assert services.get_worker().status().state == RunState.IDLE
    assert [_button(demo, label).interactive for label in ("Pause", "Resume", "Stop", "Save checkpoint now")] == \
        [False] * 4
    assert _button(demo, "Start").interactive is not False
    tick = next(fn for fn in demo.fns.values() if fn.api_name == "train_tick")
    steering = [_button(demo, label)._id for label in ("Pause", "Resume", "Stop", "Save checkpoint now")]
    assert [block._id for block in tick.outputs[LIVE_OUTPUTS + 1:LIVE_OUTPUTS + 5]] == steering
    first = tick.fn(None)
    assert [u.interactive for u in first[LIVE_OUTPUTS + 1:LIVE_OUTPUTS + 5]] == [False] * 4
    seen = first[-3]          # (..., seen, the tick timer, the idle timer)
    assert seen["state"] == RunState.IDLE
    again = tick.fn(seen)
    assert all(u == gr.skip() for u in again[LIVE_OUTPUTS + 1:LIVE_OUTPUTS + 5])        # nothing moved
    moved = tick.fn({**seen, "state": RunState.RUNNING})                                # what this browser saw
    assert [u.interactive for u in moved[LIVE_OUTPUTS + 1:LIVE_OUTPUTS + 5]] == [False] * 4


def test_one_timer_watches_at_a_time(services: Services, built: tuple[gr.Blocks, dict]) -> None:
    """With no run the tick goes to sleep and wakes the idle check; the idle check, seeing the worker move, wakes
    the tick and sleeps: a page with a run going pays for the tick's events only."""
    demo, widgets = built
    fns = {fn.api_name: fn for fn in demo.fns.values()}
    tick, idle = fns["train_tick"], fns["train_idle_check"]
    assert [b._id for b in tick.outputs[-2:]] == [widgets["timer"]._id, widgets["idle_timer"]._id]
    assert [b._id for b in idle.outputs] == [widgets["timer"]._id, idle.inputs[0]._id, widgets["idle_timer"]._id]
    asleep = tick.fn(None)[-2:]                                          # idle worker: the tick sleeps ...
    assert (asleep[0].active, asleep[1].active) == (False, True)         # ... and the idle check watches
    woken = idle.fn(None)                                                # a version it has not seen: wake the tick
    assert (woken[0].active, woken[2].active) == (True, False) and woken[1] is not None
    assert all(u == gr.skip() for u in idle.fn(woken[1]))               # nothing moved: nothing changes


@pytest.mark.parametrize("name, words", [("pause", "pausing after this step…"), ("resume", "resuming…"),
                                         ("stop", "stopping…")])
def test_pause_resume_and_stop_are_acknowledged_at_once(built: tuple[gr.Blocks, dict], name: str, words: str) -> None:
    """Pressing the button writes what it asked for into the status in the browser (no request, nothing to wait
    for on a machine busy training); the worker's answer, through the queue, replaces it."""
    demo, widgets = built
    button = _button(demo, name.capitalize())
    config = demo.get_config_file()["dependencies"]
    acks = [d for d in config if d["js"] and [button._id, "click"] in [list(t) for t in d["targets"]]]
    assert len(acks) == 1 and acks[0]["outputs"] == [widgets["status"]._id] and not acks[0]["backend_fn"]
    written = json.loads(acks[0]["js"].removeprefix("() => "))
    assert words in written and written == controls.ACKNOWLEDGEMENTS[name]
    served = [d for d in config if d["api_name"] == f"train_{name}"]
    assert len(served) == 1 and served[0]["outputs"] == [widgets["status"]._id]


def test_a_refused_control_leaves_the_status_as_it_was(built: tuple[gr.Blocks, dict]) -> None:
    """A refused Start (bad settings) used to empty the status, and with no run the idle live view never drew
    it again: nothing that follows a control's failure writes the status."""
    demo, widgets = built
    config = demo.get_config_file()["dependencies"]
    by_name = {d["api_name"]: d for d in config}
    status = widgets["status"]._id
    for name in ("train_start", "train_pause", "train_resume", "train_stop", "train_save", "train_continue"):
        after = [d for d in config if d["trigger_after"] == by_name[name]["id"]]
        assert after and not any(status in d["outputs"] for d in after), name


def test_the_rates_step_by_sensible_amounts_within_their_ranges(built: tuple[gr.Blocks, dict]) -> None:
    demo, widgets = built
    by_label = {b.label: b for b in widgets["controls"] if isinstance(b, gr.Number)}
    rate, masking = by_label["Learning rate"], by_label["Masking rate"]
    assert (rate.step, rate.minimum, rate.maximum) == fields.LEARNING_RATE == (0.00001, 0.00001, 1.0)
    assert (masking.step, masking.minimum, masking.maximum) == fields.MASK_RATE == (0.01, 0.01, 0.99)
    for field in (rate, masking):
        steps_from_minimum = (field.value - field.minimum) / field.step
        assert abs(steps_from_minimum - round(steps_from_minimum)) < 1e-9   # ArrowUp stays on the grid
        assert field.minimum <= field.value + field.step <= field.maximum < 1.0 + 1e-12
    assert rate.value + rate.step == pytest.approx(0.00051) and masking.value + masking.step == pytest.approx(0.16)
    # The range is the browser's; a value typed past it reaches the form's own check, which names the setting.
    assert masking.preprocess(1.5) == 1.5 and rate.preprocess(-1) == -1
