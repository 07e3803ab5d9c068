"""explorer/views/canvas_view.py's ``asked`` stamp (docs/design/browser-views.md, *Late answers*): every canvas value an
endpoint returns carries when the server began its request, so the page can drop an answer for another input that
is older than the one it shows; taken at the start, a slow answer begun first stays the older one."""
from __future__ import annotations

import threading
import time

import pytest

from explorer.views import canvas_view as canvas_view
from explorer.endpoints import handler


def value(kind: str, view_id: str = "a") -> dict:
    return {"kind": kind, "id": view_id, "tokens": ["[CLS]"]}


def test_every_canvas_value_in_an_answer_is_stamped_and_nothing_else() -> None:
    answer = (value("maps"), value("head_view"), {"kind": "other", "id": "x"}, {"id": "y"}, "text", None)
    canvas_view.stamp(answer, 7)
    assert [a.get("asked") for a in answer[:4]] == [7, 7, None, None]
    assert canvas_view.stamp(value("neuron"), 9)["asked"] == 9
    assert {"__type__": "update"} == canvas_view.stamp({"__type__": "update"}, 3)   # gr.update / gr.skip


def test_stamps_grow_strictly_even_within_one_clock_tick() -> None:
    stamps = [canvas_view.asked_now() for _ in range(2000)]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
    assert abs(stamps[0] - time.time_ns()) < 60 * 10**9    # wall-clock nanoseconds: growing across restarts


def test_a_slow_answer_begun_first_carries_the_older_stamp() -> None:
    """Two requests of one page: the first begins, the second begins and ends, then the first ends. The first's
    values carry the smaller stamp, so the page keeps the second's input."""
    first_began, second_done = threading.Event(), threading.Event()

    def slow(view_id: str) -> tuple:
        first_began.set()
        assert second_done.wait(10)
        return value("maps", view_id), value("model_view", view_id)

    def quick(view_id: str) -> tuple:
        return value("maps", view_id), value("model_view", view_id)

    results: dict[str, tuple] = {}
    worker = threading.Thread(target=lambda: results.setdefault("first", canvas_view.stamped(slow)("A")))
    worker.start()
    assert first_began.wait(10)
    results["second"] = canvas_view.stamped(quick)("B")
    second_done.set()
    worker.join(10)
    first, second = results["first"], results["second"]
    assert first[0]["asked"] == first[1]["asked"] < second[0]["asked"] == second[1]["asked"]


def test_every_endpoint_handler_stamps_what_it_returns() -> None:
    """``explorer.endpoints.handler`` (every event of the app goes through it) stamps its canvas values, keeps the
    handler's signature for the API page, and leaves other outputs as they are."""
    def show(model_key: str, text: str) -> tuple:
        """Doc."""
        return value("dimensions"), f"{model_key}:{text}"

    served = handler(show, "show_test", gpu=False)
    before = canvas_view.asked_now()
    dims, text = served("default", "hi")
    assert dims["asked"] > before and text == "default:hi"
    import inspect
    assert list(inspect.signature(served).parameters) == ["model_key", "text"]


@pytest.mark.parametrize("kind", sorted(canvas_view.KINDS))
def test_the_views_kinds_are_the_values_the_modules_build(kind: str) -> None:
    """Each kind named in ``KINDS`` is built by one of the canvas modules (a renamed kind would go unstamped)."""
    from pathlib import Path

    sources = "".join(p.read_text(encoding="utf-8") for p in Path(canvas_view.__file__).parents[1].rglob("canvas.py"))
    sources += (Path(canvas_view.__file__).parents[1] / "attention" / "neuron_canvas.py").read_text(encoding="utf-8")
    assert f'"kind": "{kind}"' in sources
