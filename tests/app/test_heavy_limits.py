"""Heavy requests cannot crowd out light ones, and one visitor cannot take all the heavy work (issue 27).

Heavy requests wait at the app's heavy gate (``explorer/serving/heavy_limits.py``), not in Gradio's queue: with
``EXPLORER_QUEUE_SIZE=2``, one running and three waiting ``/attribute`` calls leave ``/tokenize`` answering,
and a fifth heavy call is refused with a sentence saying how many wait. In public mode a visitor (a session)
may have one heavy request running or waiting; a second is refused (the very same request again joins the
first instead), another visitor's is not, and the first may try again once its own has gone. The gate itself is
checked on its own first: first come first served, limits from the environment, a request that leaves the line
(cancelled, refused, its client gone) frees it.
Attribution is slowed on purpose (0.2 s per forward pass: a call takes a minute unless cancelled).
"""
from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from engine import cancellation  # noqa: E402
from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from explorer.serving import heavy_limits as heavy_limits  # noqa: E402
from explorer.serving import in_flight  # noqa: E402
from explorer.serving.heavy_limits import HeavyGate, HeavyLimits  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.app_helpers import launch, slowed_attribution  # noqa: E402
from support.probing_helpers import make_services  # noqa: E402

STEP_S = 0.2
ATTRIBUTE = dict(model_key="default", task="fill_mask", text="the cat [MASK] on the mat.", steps=300,
                 api_name="/attribute")
TOKENIZE = ("default", "the cat sat", "", 32)


def _wait(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.05)


# -- the gate on its own ------------------------------------------------------------------------------------------

def test_the_limits_come_from_the_environment() -> None:
    assert HeavyLimits.from_env({}) == HeavyLimits(running=1, waiting=8, per_client=0)       # private: no limit
    assert HeavyLimits.from_env({"EXPLORER_PUBLIC": "1"}) == HeavyLimits(running=1, waiting=4, per_client=1)
    assert HeavyLimits.from_env({"EXPLORER_HEAVY_PER_CLIENT": "2", "EXPLORER_HEAVY_QUEUE": "0",
                                 "EXPLORER_HEAVY_CONCURRENCY": "3"}) == HeavyLimits(3, 0, 2)
    assert HeavyLimits.from_env({"EXPLORER_PUBLIC": "1", "EXPLORER_HEAVY_PER_CLIENT": "0"}).per_client == 0
    for name, raw in (("EXPLORER_HEAVY_QUEUE", "-1"), ("EXPLORER_HEAVY_PER_CLIENT", "one")):
        with pytest.raises(ValueError, match=name):
            HeavyLimits.from_env({name: raw})


def test_first_come_first_served_and_a_full_line_is_refused_with_its_length() -> None:
    gate = HeavyGate(HeavyLimits(running=1, waiting=2))
    a, b, c = (gate.admit(None) for _ in range(3))
    assert gate.counts() == (1, 2) and a.started.is_set() and not (b.started.is_set() or c.started.is_set())
    with pytest.raises(gr.Error, match="2 heavy requests already waiting .*try again in a moment"):
        gate.admit(None)
    assert gate.counts() == (1, 2)                                   # the refused one took no place
    gate.release(a)
    assert b.started.is_set() and not c.started.is_set() and gate.counts() == (1, 1)
    gate.release(c)                                                  # leaves the line before its turn
    gate.release(b)
    assert gate.counts() == (0, 0)


def test_one_client_may_have_per_client_requests_running_or_waiting() -> None:
    gate = HeavyGate(HeavyLimits(running=1, waiting=4, per_client=1))
    mine = gate.admit("session-a")
    with pytest.raises(gr.Error, match="You already have 1 heavy request running or waiting"):
        gate.admit("session-a")
    theirs = gate.admit("session-b")                                 # another visitor waits as usual
    assert [gate.admit(None) for _ in range(2)] and gate.counts() == (1, 3)   # unknown clients: no limit
    gate.release(mine)
    assert theirs.started.is_set()
    assert not gate.admit("session-a").started.is_set()             # may ask again once its own is gone


def test_a_waiting_request_that_is_cancelled_or_whose_client_left_frees_its_place(capsys) -> None:
    async def scenario() -> None:
        gate = HeavyGate(HeavyLimits(running=1, waiting=2))
        first = gate.admit(None)

        async def wait_in_line(alive: Callable[[], bool]) -> None:
            async with gate.slot(None, alive):
                pass

        gone = [True]
        cancelled = asyncio.ensure_future(wait_in_line(lambda: True))
        left = asyncio.ensure_future(wait_in_line(lambda: gone[0]))
        await asyncio.sleep(0.01)
        assert gate.counts() == (1, 2)
        cancelled.cancel()
        gone[0] = False
        await asyncio.wait([cancelled, left])
        assert cancelled.cancelled() and "cancelled" in str(left.exception())
        assert gate.counts() == (1, 0)
        gate.release(first)
        assert gate.counts() == (0, 0)

    asyncio.run(scenario())
    told = capsys.readouterr().out          # gr.Info prints outside an event; in the browser it is a toast
    assert "Waiting for the heavy tools: 1 heavy request ahead of yours." in told
    assert "Waiting for the heavy tools: 2 heavy requests ahead of yours." in told


# -- the served app --------------------------------------------------------------------------------------------------

@pytest.fixture
def forwards(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Slow attribution down (one point per batch, ``STEP_S`` each); the list counts its forward passes."""
    return slowed_attribution(monkeypatch, STEP_S)


@pytest.fixture
def services(tiny_tokenizer: WordPieceTokenizer) -> Services:
    return make_services(tiny_tokenizer)


class Served:
    """Whole apps served with given settings, and the heavy jobs submitted to them."""

    def __init__(self, services: Services) -> None:
        self.services, self.demos, self.jobs = services, [], []

    def start(self, environ: dict[str, str]) -> tuple[gr.Blocks, HeavyGate]:
        import app

        demo = app.create_app(self.services, environ)
        launch(demo)
        self.demos.append(demo)
        return demo, heavy_limits.gate_for(demo)

    def submit(self, client: Client, gate: HeavyGate, expect: tuple[int, int], steps: int | None = None):
        """Submit one slow ``/attribute`` call and wait until the gate shows ``expect`` (running, waiting). Each is a
        new request unless ``steps`` is given: an identical one of the same client joins the earlier one
        (``explorer/serving/in_flight.py``)."""
        job = client.submit(**{**ATTRIBUTE, "steps": steps or ATTRIBUTE["steps"] - len(self.jobs)})
        self.jobs.append(job)
        _wait(lambda: gate.counts() == expect)
        return job


@pytest.fixture
def served(services: Services, no_internet: list[str]) -> Iterator[Served]:
    """Afterwards every job is cancelled and no work is left running or waiting."""
    apps = Served(services)
    yield apps
    for job in apps.jobs:
        job.cancel()
    for demo in apps.demos:
        _wait(lambda: cancellation.running() == 0 and heavy_limits.gate_for(demo).counts() == (0, 0), 90)
        demo.close()


def test_heavy_requests_piling_up_leave_light_requests_answering(served: Served, forwards: list[int]) -> None:
    demo, gate = served.start({"EXPLORER_QUEUE_SIZE": "2", "EXPLORER_HEAVY_QUEUE": "3"})
    client = Client(demo.local_url, verbose=False)
    for waiting in range(4):                                         # one client, no per-client limit here
        served.submit(client, gate, (1, waiting))
    _wait(lambda: cancellation.running() == 1)                       # one computes, three wait (4 > queue size 2)
    html = client.predict(*TOKENIZE, api_name="/tokenize")[0]
    assert "cat" in html                                             # not "Queue is full"
    with pytest.raises(AppError, match="3 heavy requests already waiting .*try again in a moment"):
        client.predict(**{**ATTRIBUTE, "steps": 200})
    assert gate.counts() == (1, 3) and forwards[0] < 300
    assert client.predict(*TOKENIZE, api_name="/tokenize")[0] == html


def test_in_public_mode_a_visitor_has_one_heavy_request_at_a_time(served: Served, forwards: list[int]) -> None:
    demo, gate = served.start({"EXPLORER_PUBLIC": "1"})
    mine, theirs = (Client(demo.local_url, verbose=False) for _ in range(2))
    first = served.submit(mine, gate, (1, 0))
    with pytest.raises(AppError, match="You already have 1 heavy request running or waiting"):
        mine.predict(**{**ATTRIBUTE, "steps": 200})
    assert "cat" in mine.predict(*TOKENIZE, api_name="/tokenize")[0]   # light work is not limited per visitor
    served.submit(theirs, gate, (1, 1))                              # another visitor waits as usual
    first.cancel()
    _wait(lambda: gate.counts() == (1, 0))                           # theirs runs now
    served.submit(mine, gate, (1, 1), steps=250)                     # and mine may wait again
    served.submit(mine, gate, (1, 1), steps=250)                     # the very same request: it joins, not refused
    _wait(lambda: in_flight.table_for(demo).counts() == (2, 1))      # theirs, and mine with the one joined to it
    assert gate.counts() == (1, 1)
