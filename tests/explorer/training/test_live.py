"""The live view sends only what changed: a browser polling an unchanged run gets nothing to redraw."""
from __future__ import annotations

import time
from typing import Iterator

import gradio as gr
import pytest

from explorer.services import Services, default_services
from explorer.training import job as training_job
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

    spec = training_job.make_spec(services, "tiny", "shakespeare", 20, 200, 32, 4, 5e-4, 6, 0.15, False, True)
    worker.start(spec)
    assert version(worker.status()) != idle                                  # the idle check notices a run
    assert worker.join(120)
    time.sleep(1.1)                                                          # the checkpoint listing's cache
    done, seen, active = live_update(services, seen)
    assert sent(done) == list(range(LIVE_OUTPUTS)) and not active            # status, curves, batch, checkpoints
    assert done[0].startswith("**finished**") and done[1]["points"]["train:mlm_loss"][0] == [1, 2, 3, 4, 5, 6]
    assert done[1]["run"] == worker.status().run_id and done[1]["reset"]     # a run this browser had nothing of
    assert "(means of the last 20 steps" in done[0]
    assert sent(live_update(services, seen)[0]) == []                        # a finished run stays quiet


class FakeWorker:
    """A worker whose run logs a record each time ``step()`` is called (what the live view reads of one)."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.run_id = 1

    def step(self) -> None:
        n = len(self.records) + 1
        self.records.append({"kind": "train", "step": n, "mlm_loss": 10.0 / n, "nsp_acc": n % 2, "lr": 1e-4})

    def metrics_since(self, index: int = 0) -> tuple[list[dict], int]:
        index = 0 if index > len(self.records) else index
        return [dict(r) for r in self.records[index:]], len(self.records)


def test_each_tick_sends_only_the_points_of_new_records(monkeypatch) -> None:
    from types import SimpleNamespace

    from explorer.runs.curves import curves_since

    fake = FakeWorker()
    st = SimpleNamespace(run_id=1)
    for _ in range(30):
        fake.step()
    value, next_index, means = curves_since(fake, st.run_id, {})
    assert value["reset"] and value["points"]["train:mlm_loss"][0] == list(range(1, 31)) and next_index == 30
    seen = {"curves_run": 1, "curves_next": next_index}
    assert curves_since(fake, st.run_id, seen)[0] is None                       # nothing new: nothing sent
    fake.step(), fake.step()
    value, next_index, means = curves_since(fake, st.run_id, seen)
    assert not value["reset"] and value["points"]["train:mlm_loss"][0] == [31, 32] and "charts" not in value
    assert means["nsp_acc"] == value["points"]["train:nsp_acc"][2][-1] == 0.5    # the status's mean: the curve's end
    st.run_id = 2                                                            # a new run: its points from the start
    fake.records, fake.run_id = fake.records[:3], 2
    value, next_index, _ = curves_since(fake, st.run_id, {"curves_run": 1, "curves_next": 32})
    assert value["reset"] and value["points"]["train:mlm_loss"][0] == [1, 2, 3] and value["run"] == 2
