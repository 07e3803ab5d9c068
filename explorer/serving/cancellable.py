"""A heavy handler that stops when its request is cancelled or its client goes away (docs/design/gradio-idioms.md).

Gradio 6 cancels a job (``/cancel``, ``job.cancel()`` in ``gradio_client``, a tab's *Stop*) by cancelling its
asyncio task, but a plain (sync) handler runs in a worker thread that nothing can interrupt: it kept computing
for minutes after its caller had gone. A client that disconnects is not even cancelled: Gradio only marks its
queue event dead (``Event.alive = False``). :func:`stop_on_cancel` makes the handler an ``async`` function
that runs the sync one in a worker thread (as Gradio would) inside ``engine.cancellation.stoppable``, with a
stop check that turns true when the task is cancelled or the event is no longer alive; the engine's long
loops call ``cancellation.check()`` between steps, so the thread ends within one step. The cancelled task
waits for its thread to end, so the heavy concurrency slot is free only once the work has really stopped.
"""
from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from typing import Any

import anyio
import gradio as gr

from engine import cancellation

CANCELLED_MESSAGE = "The request was cancelled before it finished."


def event_alive() -> Callable[[], bool]:
    """A check of whether the queue event now being served is still wanted (False once its client disconnected).
    Reads Gradio's queue (``Event.alive``, set False by ``Queue.clean_events``); always True when the handler
    is called outside a queued event (a direct call, a test)."""
    from gradio.context import LocalContext

    event_id, blocks = LocalContext.event_id.get(None), LocalContext.blocks.get(None)
    queue = getattr(blocks, "_queue", None)
    for job in (getattr(queue, "active_jobs", None) or []):
        for event in job or []:
            if getattr(event, "_id", None) == event_id:
                return lambda: bool(getattr(event, "alive", True))
    return lambda: True


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with ``cancellation.Cancelled`` turned into a short ``gr.Error`` (no logged trace: nothing failed)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except cancellation.Cancelled:
            raise gr.Error(CANCELLED_MESSAGE, print_exception=False) from None
    return wrapper


def stop_on_cancel(fn: Callable[..., Any], inner: Callable[[Callable[..., Any]], Callable[..., Any]]) \
        -> Callable[..., Any]:
    """An ``async`` handler running ``inner(quiet fn)`` in a worker thread that stops between engine steps once
    the request is cancelled or its client is gone. ``inner`` adds the wrappers that belong around the work
    (``friendly_errors``); parameters and docstring stay ``fn``'s (the endpoint's API)."""
    work = inner(_quiet(fn))

    @functools.wraps(fn)
    async def served(*args: Any, **kwargs: Any) -> Any:
        stop, alive = threading.Event(), event_alive()

        def run() -> Any:
            with cancellation.stoppable(lambda: stop.is_set() or not alive()):
                return work(*args, **kwargs)

        thread = asyncio.ensure_future(anyio.to_thread.run_sync(run))     # the context (progress...) is copied
        try:
            return await asyncio.shield(thread)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait([thread])          # within one engine step; the heavy slot frees only then
            if not thread.cancelled():
                thread.exception()                # retrieved: its gr.Error has no one to go to
            raise
    return served
