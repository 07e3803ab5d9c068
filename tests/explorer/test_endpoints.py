"""``explorer.endpoints``: one call declares an event with its API name, the GPU decorator, error translation and
clearing of its outputs on failure; the handler keeps its parameters and docstring (the API's), takes the
endpoint's name, and the function it was made from is left as it was. Heavy work goes to its own queue group
with its own limit, through a handler that stops when its request is cancelled."""
from __future__ import annotations

import asyncio
import inspect
import threading

import gradio as gr
import pytest

from explorer.serving import gpu as gpu

from explorer.serving import heavy_limits as heavy_limits
from engine import cancellation
from explorer.serving.cancellable import CANCELLED_MESSAGE
from explorer.endpoints import HEAVY, endpoint, handler, is_handler, wire_run
from support.event_helpers import failure_clears


def make_double():
    """A fresh handler function each call (``gpu.on_gpu`` marks the function it decorates)."""

    def double(text: str, times: float = 2) -> str:
        """Repeat a text.

        Args:
            text: the text.
            times: how often.
        """
        if not text:
            raise ValueError("Type some text.")
        return text * int(times)

    return double


def test_a_handler_keeps_the_api_and_takes_the_endpoint_name() -> None:
    double = make_double()
    served = handler(double, "repeat")
    assert served.__name__ == "repeat" and double.__name__ == "double"          # the original is untouched
    assert list(inspect.signature(served).parameters) == ["text", "times"]
    assert inspect.signature(served).parameters["times"].default == 2
    assert served.__doc__ == double.__doc__ and is_handler(served) and not is_handler(double)
    assert served("ab", 3) == "ababab"
    with pytest.raises(gr.Error, match="Type some text."):                       # a ValueError, translated
        served("")
    assert gpu.is_on_gpu(served) and not gpu.is_on_gpu(handler(make_double(), "repeat_cpu", gpu=False))


def test_endpoint_wires_name_visibility_and_clearing() -> None:
    with gr.Blocks() as demo:
        box, times, out, note = gr.Textbox(), gr.Number(2), gr.Textbox(), gr.Markdown()
        button, other = gr.Button(), gr.Button()
        endpoint(button.click, make_double(), [box, times], [out, note], api_name="repeat")
        endpoint(other.click, make_double(), [box, times], [out, note], api_name="repeat_quietly", gpu=False,
                 clear=[out], api_visibility="private")
        endpoint([box.submit, times.submit], make_double(), [box, times], out, api_name="repeat_on", clear=False)
    named = {fn.api_name: fn for fn in demo.fns.values()}
    assert named["repeat"].api_visibility == "public" and named["repeat_quietly"].api_visibility == "private"
    assert named["repeat"].fn.__name__ == "repeat" and gpu.is_on_gpu(named["repeat"].fn)
    assert not gpu.is_on_gpu(named["repeat_quietly"].fn)
    assert [trigger[1] for trigger in named["repeat_on"].targets] == ["submit", "submit"]
    assert failure_clears(demo, "repeat", [out, note])
    assert failure_clears(demo, "repeat_quietly", [out]) and not failure_clears(demo, "repeat_quietly", [out, note])
    assert not failure_clears(demo, "repeat_on", [out])


def test_wire_run_serves_one_handler_on_three_triggers() -> None:
    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Textbox()
        button = gr.Button()
        examples = gr.Examples([["ab"]], inputs=[box], api_name="repeat_example", api_visibility="private")
        events = wire_run(button, box, examples, make_double(), [box], [out], api_name="repeat")
    assert len(events) == 3
    named = {fn.api_name: fn for fn in demo.fns.values()}
    served = {named[name].fn for name in ("repeat", "repeat_submit", "repeat_example_run")}
    assert len(served) == 1 and next(iter(served))("xy") == "xyxy"
    assert [named[name].api_visibility for name in ("repeat", "repeat_submit", "repeat_example_run")] == [
        "public", "private", "private"]
    assert all(failure_clears(demo, name, [out]) for name in ("repeat", "repeat_submit", "repeat_example_run"))


def test_heavy_events_share_their_own_queue_group_and_limit(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_HEAVY_CONCURRENCY", "3")
    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Textbox()
        button, other, light = gr.Button(), gr.Button(), gr.Button()
        examples = gr.Examples([["ab"]], inputs=[box], api_name="slow_example", api_visibility="private")
        wire_run(button, box, examples, make_double(), [box], [out], api_name="slow", heavy=True)
        endpoint(other.click, make_double(), [box], [out], api_name="slower", heavy=True)
        endpoint(light.click, make_double(), [box], [out], api_name="quick")
    named = {fn.api_name: fn for fn in demo.fns.values()}
    for name in ("slow", "slow_submit", "slow_example_run", "slower"):
        assert (named[name].concurrency_id, named[name].concurrency_limit) == (HEAVY, None), name   # at the gate
        assert inspect.iscoroutinefunction(named[name].fn) and named[name].fn.__name__ == name.split("_")[0]
    assert named["quick"].concurrency_id != HEAVY and not inspect.iscoroutinefunction(named["quick"].fn)
    assert heavy_limits.gate_for(demo).limits.running == 3                  # the heavy gate runs 3 at once
    served = named["slower"].fn
    assert list(inspect.signature(served).parameters) == ["text", "times"] and gpu.is_on_gpu(served)
    assert asyncio.run(served("ab", 3)) == "ababab"
    with pytest.raises(gr.Error, match="Type some text."):
        asyncio.run(served(""))


def test_a_cancelled_heavy_handler_stops_its_thread_before_it_returns() -> None:
    started, steps = threading.Event(), [0]

    def slow(text: str) -> str:
        """Count steps until stopped."""
        started.set()
        while steps[0] < 10_000:
            cancellation.check()
            steps[0] += 1
            threading.Event().wait(0.01)
        return text

    served = handler(slow, "slow", gpu=False, heavy=True)

    async def call_then_cancel() -> int:
        task = asyncio.ensure_future(served("x"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return steps[0]

    at_cancel = asyncio.run(call_then_cancel())
    assert at_cancel < 10_000 and steps[0] == at_cancel and cancellation.running() == 0   # stopped, not abandoned


def test_work_stopped_without_a_cancelled_task_answers_one_sentence() -> None:
    def gone(text: str) -> str:
        """Work whose client went away: the engine stops it, and nobody is left to read the answer."""
        raise cancellation.Cancelled("the work was cancelled")

    with pytest.raises(gr.Error, match=CANCELLED_MESSAGE):
        asyncio.run(handler(gone, "gone", gpu=False, heavy=True)("x"))
