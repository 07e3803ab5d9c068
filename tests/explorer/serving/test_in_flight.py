"""One request per intention: a visitor's identical heavy request, sent while the first runs or waits, joins it.

The table on its own (two identical calls: one computation, both get its result; another visitor, other inputs or
another endpoint: not joined; the first fails, is cancelled or loses its client: the joined one gets the error or
runs itself; a joined call that is cancelled leaves the first running; bounds; nothing kept afterwards), then a
served heavy endpoint declared with ``explorer.endpoints.endpoint`` (no code of its own): one ``gradio_client``
sending the same call twice computes once, another client's call is its own.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import gradio as gr
import pytest
from gradio_client import Client

from explorer.endpoints import endpoint
from explorer.serving import heavy_limits, in_flight
from explorer.serving.cancellable import CANCELLED_MESSAGE
from explorer.serving.in_flight import InFlight, plain, request_key
from support.app_helpers import serve

KEY = request_key("visitor-a", "attribute", ("default", "the cat [MASK].", 0), {})


class Work:
    """A call's work that waits until ``release`` is set; counts how often it ran."""

    def __init__(self) -> None:
        self.runs, self.release = 0, asyncio.Event()

    async def __call__(self, answer: object = "the answer", error: BaseException | None = None) -> object:
        self.runs += 1
        await self.release.wait()
        if error is not None:
            raise error
        return answer


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_two_identical_calls_compute_once_and_both_get_the_result() -> None:
    async def scenario() -> None:
        table, work = InFlight(), Work()
        calls = [asyncio.ensure_future(table.run(KEY, work)) for _ in range(2)]
        await _settle()
        assert table.counts() == (1, 1)
        work.release.set()
        assert await asyncio.gather(*calls) == ["the answer", "the answer"]
        assert work.runs == 1 and table.counts() == (0, 0)

    asyncio.run(scenario())


@pytest.mark.parametrize("other", [
    request_key("visitor-b", "attribute", ("default", "the cat [MASK].", 0), {}),      # another visitor
    request_key("visitor-a", "attribute", ("default", "the dog [MASK].", 0), {}),      # other inputs
    request_key("visitor-a", "compare", ("default", "the cat [MASK].", 0), {}),        # another endpoint
])
def test_another_visitor_other_inputs_or_another_endpoint_are_not_joined(other) -> None:
    async def scenario() -> None:
        table, work = InFlight(), Work()
        calls = [asyncio.ensure_future(table.run(key, work)) for key in (KEY, other)]
        await _settle()
        assert table.counts() == (2, 0)
        work.release.set()
        await asyncio.gather(*calls)
        assert work.runs == 2 and table.counts() == (0, 0)

    asyncio.run(scenario())


def test_the_key_leaves_out_what_gradio_adds_and_refuses_what_is_not_plain_data() -> None:
    assert request_key("a", "x", ("t", 1, gr.Progress()), {}) == request_key("a", "x", ("t", 1, gr.Progress()), {})
    assert request_key("a", "x", (["a", "b"], {"k": 1}), {}) != request_key("a", "x", ("a", "b", {"k": 1}), {})
    assert plain({"b": [1], "a": None}) == plain({"a": None, "b": (1,)})
    assert request_key("a", "x", (object(),), {}) is None           # not plain data: run, never joined
    assert request_key(None, "x", ("t",), {}) is None and request_key("", "x", ("t",), {}) is None   # no visitor


def test_when_the_first_fails_the_joined_call_gets_its_error() -> None:
    async def scenario() -> None:
        table, work = InFlight(), Work()
        failure = gr.Error("There is no word 7.", print_exception=False)
        calls = [asyncio.ensure_future(table.run(KEY, lambda: work(error=failure))) for _ in range(2)]
        await _settle()
        work.release.set()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert outcomes == [failure, failure] and work.runs == 1 and table.counts() == (0, 0)

    asyncio.run(scenario())


@pytest.mark.parametrize("how", ["cancelled", "client left"])
def test_when_the_first_is_stopped_the_joined_call_runs_itself(how: str) -> None:
    async def scenario() -> None:
        table, work = InFlight(), Work()
        gone = gr.Error(CANCELLED_MESSAGE, print_exception=False)
        stopped = Work()
        first = asyncio.ensure_future(table.run(KEY, lambda: stopped(error=gone)))
        second = asyncio.ensure_future(table.run(KEY, work))
        await _settle()
        assert table.counts() == (1, 1) and work.runs == 0
        if how == "cancelled":
            first.cancel()
        else:
            stopped.release.set()                   # its work stopped: the engine's check saw its client gone
        await asyncio.wait([first])
        assert first.cancelled() if how == "cancelled" else first.exception() is gone
        await _settle()
        assert table.counts() == (1, 0) and work.runs == 1   # the joined call now runs the work itself
        work.release.set()
        assert await second == "the answer" and table.counts() == (0, 0)

    asyncio.run(scenario())


def test_a_joined_call_that_is_cancelled_or_loses_its_client_leaves_the_first_running() -> None:
    async def scenario() -> None:
        table, work, here = InFlight(), Work(), [True]
        first = asyncio.ensure_future(table.run(KEY, work))
        cancelled = asyncio.ensure_future(table.run(KEY, work))
        left = asyncio.ensure_future(table.run(KEY, work, alive=lambda: here[0]))
        await _settle()
        assert table.counts() == (1, 2)
        cancelled.cancel()
        here[0] = False
        await asyncio.wait([cancelled, left])
        assert cancelled.cancelled() and CANCELLED_MESSAGE in str(left.exception())
        assert table.counts() == (1, 0) and not first.done()
        work.release.set()
        assert await first == "the answer" and work.runs == 1 and table.counts() == (0, 0)

    asyncio.run(scenario())


def test_the_table_is_bounded() -> None:
    async def scenario() -> None:
        table, work = InFlight(max_entries=2, max_joined=1), Work()
        keys = [KEY, KEY, KEY, request_key("b", "x", (), {}), request_key("c", "x", (), {})]
        calls = [asyncio.ensure_future(table.run(key, work)) for key in keys]
        await _settle()
        # KEY: one leads, one joins, the third runs on its own; b leads; c finds the table full and runs unjoined
        assert table.counts() == (2, 1) and work.runs == 4
        work.release.set()
        await asyncio.gather(*calls)
        assert table.counts() == (0, 0)

    asyncio.run(scenario())


def _wait(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.02)


def test_a_served_heavy_endpoint_joins_one_visitors_identical_calls(no_internet: list[str]) -> None:
    release, calls = threading.Event(), []

    def shout(text: str) -> str:
        """The text in capitals, once released."""
        calls.append(text)
        assert release.wait(60)
        return text.upper()

    with gr.Blocks(analytics_enabled=False) as demo:
        box, out, button = gr.Textbox(), gr.Textbox(), gr.Button()
        endpoint(button.click, shout, [box], [out], api_name="shout", gpu=False, heavy=True)
    with serve(demo) as mine:
        theirs = Client(demo.local_url, verbose=False)
        first = mine.submit("hi", api_name="/shout")
        _wait(lambda: calls == ["hi"])
        again, other = mine.submit("hi", api_name="/shout"), theirs.submit("hi", api_name="/shout")
        table, gate = in_flight.table_for(demo), heavy_limits.gate_for(demo)
        try:
            _wait(lambda: table.counts() == (2, 1) and gate.counts() == (1, 1))    # mine joined; theirs waits
        finally:
            release.set()
        assert [job.result(timeout=60) for job in (first, again, other)] == ["HI", "HI", "HI"]
        assert calls == ["hi", "hi"] and table.counts() == (0, 0) and gate.counts() == (0, 0)
