"""``explorer.endpoints``: one call declares an event with its API name, the GPU decorator, error translation and
clearing of its outputs on failure; the handler keeps its parameters and docstring (the API's), takes the
endpoint's name, and the function it was made from is left as it was."""
from __future__ import annotations

import inspect

import gradio as gr
import pytest

from explorer import gpu
from explorer.endpoints import endpoint, handler, is_handler, wire_run
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
