"""One way to declare an event of the app: :func:`endpoint` (one trigger) and :func:`wire_run` (a tab's
action on its button, Enter in its text box and a click on its examples).

Each applies, in one place, what every event handler needs:

* ``api_name`` (the endpoint's name; a public one is what ``gradio_client`` and ``/docs`` show),
* ``gpu.on_gpu`` (``gpu=True``, the default: the handler runs a model; ``gpu=False`` for one that does not),
* ``friendly_errors`` (a person reads a sentence, never a stack trace),
* ``clear_on_failure`` (``clear=True``, the default: a failed call empties its outputs; a list empties those
  outputs only; ``False`` keeps them, for a poll or an event whose outputs are its own inputs),
* ``heavy=True`` for slow work (attribution, the neighbours index, comparisons, over-training views, head
  ablation): a handler that takes its turn at the app's heavy gate (``explorer/serving/heavy_limits.py``:
  ``EXPLORER_HEAVY_CONCURRENCY`` at once, all heavy endpoints together, a bounded line, a per-client limit),
  outside Gradio's queue (its own group, ``concurrency_id="heavy"``, with no Gradio limit), so light endpoints
  keep answering however many heavy requests come; that stops between engine steps once its request is
  cancelled or its client is gone (``explorer/serving/cancellable.py``); and that joins the same visitor's
  identical request while that one runs or waits, so one intention runs once (``explorer/serving/in_flight.py``),

and names the handler after its endpoint (the name Gradio's config and its MCP tools show), so no tab writes
``fn.__name__ = ...``. The handler's parameters (names and defaults) and docstring are the endpoint's API:
``gradio_client`` and the API page read them through the wrappers (``functools.wraps``).

    def run(model_key: str, text: str, top_k: float = 5) -> tuple[Any, ...]:
        \"\"\"Predict ... (the API docs).\"\"\"
        return fill(services, model_key, text, top_k)

    endpoint(button.click, run, [picker.dropdown, text, top_k], [plot, table], api_name="fill_mask")

A handler that another handler calls (a redraw that reruns the main action) is made once with :func:`handler`
and passed to both; :func:`endpoint` leaves a function :func:`handler` made as it is.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr

from explorer.serving import gpu as gpu_module
from explorer.views.canvas_view import stamped
from explorer.serving.cancellable import stop_on_cancel
from explorer.serving.heavy_limits import gated
from explorer.serving.in_flight import joined
from explorer.ui_errors import friendly_errors

HANDLER_MARK = "__explorer_handler__"      # set on what :func:`handler` returns
HEAVY_MARK = "__explorer_heavy__"          # set on what :func:`handler` returns for heavy work
HEAVY = "heavy"                            # the heavy endpoints' concurrency group


def handler(fn: Callable[..., Any], api_name: str, *, gpu: bool = True,
            duration: int | None = None, heavy: bool = False) -> Callable[..., Any]:
    """``fn`` ready to serve ``api_name``: on the GPU when ``gpu`` (at most ``duration`` seconds on ZeroGPU,
    when given), its errors translated for a person, named ``api_name``; ``heavy``: run in its turn at the heavy
    gate, stopped between engine steps once its request is cancelled, and joined by the same visitor's identical
    call while it runs or waits; the canvas values it returns carry when it began (``canvas_view.stamped``).
    Apply once per function."""
    inner = gpu_module.on_gpu(stamped(fn), duration=duration) if gpu else stamped(fn)
    wrapped = (joined(gated(stop_on_cancel(inner, friendly_errors)), api_name) if heavy
               else friendly_errors(inner))
    wrapped.__name__ = api_name            # the wrapper's own name: the config's and the MCP tool's name
    setattr(wrapped, HANDLER_MARK, True)
    setattr(wrapped, HEAVY_MARK, heavy)
    return wrapped


def is_handler(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` came from :func:`handler` (so :func:`endpoint` uses it as it is)."""
    return bool(getattr(fn, HANDLER_MARK, False))


def queue_options(served: Callable[..., Any]) -> dict[str, Any]:
    """The listener's queue arguments for ``served``: for heavy work the heavy group with no Gradio limit (its
    handler waits at the heavy gate, not in Gradio's queue), else none (the app's default concurrency per event)."""
    if getattr(served, HEAVY_MARK, False):
        return {"concurrency_id": HEAVY, "concurrency_limit": None}
    return {}


def clear_on_failure(event: Any, outputs: Sequence[Any]) -> None:
    """After ``event`` fails (its handler raised ``gr.Error``), empty ``outputs``, so the old result does
    not stay on screen under the new error as if it answered the new input."""
    outputs = list(outputs)
    event.failure(lambda: tuple(None for _ in outputs) if len(outputs) > 1 else None, inputs=None,
                  outputs=outputs, api_visibility="private", show_progress="hidden", queue=False)


def endpoint(trigger: Callable[..., Any] | Sequence[Any], fn: Callable[..., Any], inputs: Any, outputs: Any, *,
             api_name: str, gpu: bool = True, clear: bool | Sequence[Any] = True, duration: int | None = None,
             heavy: bool = False, **gradio_kwargs: Any) -> Any:
    """Wire ``fn`` to ``trigger`` (an event listener such as ``button.click``, or a list of them for ``gr.on``)
    as the endpoint ``api_name``; returns the event (``.then`` / ``.success`` chain on it).

    ``fn`` goes through :func:`handler` (unless it already did; ``heavy`` as there); ``clear`` empties
    ``outputs`` (or the outputs it lists) when it fails.
    ``gradio_kwargs`` go to the listener as they are (``api_visibility``, ``show_progress``, ``trigger_mode``...).
    """
    served = fn if is_handler(fn) else handler(fn, api_name, gpu=gpu, duration=duration, heavy=heavy)
    gradio_kwargs = {**queue_options(served), **gradio_kwargs}
    if isinstance(trigger, Sequence):
        event = gr.on(list(trigger), served, inputs=inputs, outputs=outputs, api_name=api_name, **gradio_kwargs)
    else:
        event = trigger(served, inputs=inputs, outputs=outputs, api_name=api_name, **gradio_kwargs)
    cleared = clear if isinstance(clear, Sequence) else (outputs if clear else [])
    if cleared:
        clear_on_failure(event, cleared if isinstance(cleared, Sequence) else [cleared])
    return event


def wire_run(button: Any, box: Any, examples: Any, fn: Callable[..., Any], inputs: Any, outputs: Sequence[Any], *,
             api_name: str, gpu: bool = True, clear: bool | Sequence[Any] = True, heavy: bool = False,
             **gradio_kwargs: Any) -> list[Any]:
    """A tab's one action on its three triggers: ``button`` (the public ``api_name``), Enter in ``box`` and a
    click on ``examples`` (private ``<api_name>_submit`` / ``<api_name>_example_run``), one handler for all
    three, each event clearing ``outputs`` (``clear`` as in :func:`endpoint`) when it fails. Returns the three
    events, in that order."""
    served = fn if is_handler(fn) else handler(fn, api_name, gpu=gpu, heavy=heavy)
    wired = dict(inputs=inputs, outputs=outputs, clear=clear, **gradio_kwargs)
    private: dict[str, Any] = dict(api_visibility="private", **wired)
    return [endpoint(button.click, served, api_name=api_name, **wired),
            endpoint(box.submit, served, api_name=f"{api_name}_submit", **private),
            endpoint(examples.load_input_event.then, served, api_name=f"{api_name}_example_run", **private)]
