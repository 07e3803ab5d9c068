"""The Fine-tune tab's run controls behave as the Training tab's (``explorer.runs.controls``): Pause / Resume /
Stop / Save checkpoint now are greyed out while there is no fine-tuning run they can change (none, one that ended,
or a pretraining run, which belongs to the Training tab), pressing Pause / Resume / Stop says so in the status at
once, and a refused control leaves the status as it was instead of blanking it. The tab's words a learner may not
know (fine-tune, F1, exact match) link to the glossary."""
from __future__ import annotations

import json
from typing import Any, Iterator

import gradio as gr
import pytest

from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune import tab as finetune_tab
from explorer.finetune.live import LIVE_OUTPUTS
from explorer.finetune.status import steering_state
from explorer.glossary import gloss
from explorer.services import Services
from explorer.runs import controls
from support.finetune_tab_helpers import tiny_app_services
from support.probing_helpers import tab_app

pytestmark = pytest.mark.usefixtures("one_thread")

STEERING = ("Pause", "Resume", "Stop", "Save checkpoint now")


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    with tiny_app_services(tmp_path_factory.mktemp("finetune-controls"), ["the old man"]) as svc:
        yield svc


@pytest.fixture(scope="module")
def built(services: Services) -> tuple[gr.Blocks, dict[str, Any]]:
    return tab_app(services, finetune_tab.build)


def _button(demo: gr.Blocks, label: str) -> gr.Button:
    return next(b for b in demo.blocks.values() if isinstance(b, gr.Button) and b.value == label)


@pytest.mark.parametrize("state", list(RunState))
def test_the_controls_act_on_a_fine_tuning_run_and_never_on_a_pretraining_one(state: RunState) -> None:
    tuning = WorkerStatus(state, "", task="classification")
    assert steering_state(tuning) == state
    assert [u.interactive for u in controls.steering_updates(steering_state(tuning))] == \
        list(controls.allowed(state).values())
    pretraining = WorkerStatus(state, "", task="pretraining")          # the Training tab steers it
    assert not any(u.interactive for u in controls.steering_updates(steering_state(pretraining)))


def test_with_no_run_the_controls_are_greyed_and_the_tick_keeps_them_so(services: Services,
                                                                          built: tuple[gr.Blocks, dict]) -> None:
    demo, _ = built
    assert services.get_worker().status().state == RunState.IDLE
    assert [_button(demo, label).interactive for label in STEERING] == [False] * 4
    assert _button(demo, "Start").interactive is not False
    tick = next(fn for fn in demo.fns.values() if fn.api_name == "finetune_tick")
    steering = [_button(demo, label)._id for label in STEERING]
    assert [block._id for block in tick.outputs[LIVE_OUTPUTS:LIVE_OUTPUTS + 4]] == steering
    first = tick.fn(None)
    assert [u.interactive for u in first[LIVE_OUTPUTS:LIVE_OUTPUTS + 4]] == [False] * 4
    seen = first[-3]          # (..., seen, the tick timer, the idle timer)
    assert seen["steer"] == RunState.IDLE
    assert all(u == gr.skip() for u in tick.fn(seen)[LIVE_OUTPUTS:LIVE_OUTPUTS + 4])     # nothing moved
    moved = tick.fn({**seen, "steer": RunState.RUNNING})                                # the run this browser saw ended
    assert [u.interactive for u in moved[LIVE_OUTPUTS:LIVE_OUTPUTS + 4]] == [False] * 4


@pytest.mark.parametrize("name, words", [("pause", "pausing after this step…"), ("resume", "resuming…"),
                                         ("stop", "stopping…")])
def test_pause_resume_and_stop_are_acknowledged_at_once(built: tuple[gr.Blocks, dict], name: str, words: str) -> None:
    """Pressing the button writes what it asked for into the status in the browser, before the worker answers."""
    demo, widgets = built
    button = _button(demo, name.capitalize())
    config = demo.get_config_file()["dependencies"]
    acks = [d for d in config if d["js"] and [button._id, "click"] in [list(t) for t in d["targets"]]]
    assert len(acks) == 1 and acks[0]["outputs"] == [widgets["status"]._id] and not acks[0]["backend_fn"]
    assert words in json.loads(acks[0]["js"].removeprefix("() => "))
    served = [d for d in config if d["api_name"] == f"finetune_{name}"]
    assert len(served) == 1 and served[0]["outputs"] == [widgets["status"]._id]


def test_a_refused_control_leaves_the_status_as_it_was(built: tuple[gr.Blocks, dict]) -> None:
    """A refused Start (bad settings) used to empty the status; now nothing that follows a control writes it, and
    the next tick redraws everything (what this browser was sent is forgotten)."""
    demo, widgets = built
    config = demo.get_config_file()["dependencies"]
    by_name = {d["api_name"]: d for d in config}
    status, seen = widgets["status"]._id, widgets["seen"]._id
    for name in ("finetune_start", "finetune_pause", "finetune_resume", "finetune_stop", "finetune_save"):
        after = [d for d in config if d["trigger_after"] == by_name[name]["id"]]
        assert after and not any(status in d["outputs"] for d in after), name
        assert any(seen in d["outputs"] and not d["trigger_only_on_failure"] for d in after), name


def test_the_words_a_learner_may_not_know_are_linked_to_the_glossary_once(built: tuple[gr.Blocks, dict]) -> None:
    demo, _ = built
    shown = "\n".join(str(b.value) for b in demo.blocks.values() if isinstance(b, gr.Markdown))
    for term, word in (("fine-tune", "Fine-tune"), ("F1", None), ("exact match", None)):
        link = gloss(term, word)
        assert finetune_tab.INTRO.count(link) == 1 and link in shown, term
