"""The live view sends only what changed: a browser polling an unchanged run gets nothing to redraw."""
from __future__ import annotations

import time
from typing import Iterator

import gradio as gr
import pytest

from explorer.services import Services, default_services
from explorer.training import tab as training_tab
from explorer.runs.status import version
from explorer.training.live import LIVE_OUTPUTS, live_update

pytestmark = pytest.mark.usefixtures("one_thread")
SKIP = gr.skip()


@pytest.fixture()
def services(tmp_path) -> Iterator[Services]:
    svc = default_services(runs_root=tmp_path / "runs")
    yield svc
    svc.get_worker().close(timeout_s=30)


def sent(outputs) -> list[int]:
    return [i for i, value in enumerate(outputs) if not (isinstance(value, dict) and value == SKIP)]


def test_unchanged_sends_nothing_and_a_new_record_sends_the_curves(services: Services) -> None:
    worker = services.get_worker()
    outputs, seen, active = live_update(services, None)
    assert len(outputs) == LIVE_OUTPUTS and sent(outputs) == list(range(LIVE_OUTPUTS)) and not active
    again, seen_again, _ = live_update(services, seen)
    assert sent(again) == [] and seen_again == seen                          # idle: nothing to redraw
    idle = version(worker.status())

    spec = training_tab.make_spec(services, "tiny", "shakespeare", 20, 200, 32, 4, 5e-4, 6, 0.15, False, True)
    worker.start(spec)
    assert version(worker.status()) != idle                                  # the idle check notices a run
    assert worker.join(120)
    time.sleep(1.1)                                                          # the checkpoint listing's cache
    done, seen, active = live_update(services, seen)
    assert sent(done) == list(range(LIVE_OUTPUTS)) and not active            # status, curves, batch, checkpoints
    assert done[0].startswith("**finished**") and len(done[1].data[0].x) == 6
    assert sent(live_update(services, seen)[0]) == []                        # a finished run stays quiet
