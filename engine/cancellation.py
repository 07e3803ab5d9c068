"""Stopping long work whose caller no longer wants it: a stop check the caller installs, long loops that
call :func:`check` between steps, and a count of the work running (docs/design/gradio-idioms.md).

The caller (the app, for a request that was cancelled or whose client went away) runs the work inside
``with stoppable(should_stop):``; a probe's loop calls :func:`check` between its steps (integration
batches, checkpoints, corpus batches), which raises :class:`Cancelled` once ``should_stop()`` is true, so the
thread stops within one step instead of computing an answer nobody reads. Outside :func:`stoppable`,
:func:`check` does nothing: the engine used from Python or a command line runs to the end.

The check is a context variable, so every thread or task started with a copy of the context sees its own
request's check, and concurrent requests never see each other's.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar
from contextvars import ContextVar

_SHOULD_STOP: ContextVar[Callable[[], bool] | None] = ContextVar("engine_should_stop", default=None)
_lock = threading.Lock()
_running = 0
T = TypeVar("T")


class Cancelled(Exception):
    """The work was stopped between two steps because its caller asked it to stop."""


def check() -> None:
    """Raise :class:`Cancelled` when the installed stop check (see :func:`stoppable`) says stop."""
    should_stop = _SHOULD_STOP.get()
    if should_stop is not None and should_stop():
        raise Cancelled("the work was cancelled")


def checked(items: Iterable[T]) -> Iterator[T]:
    """``items`` one by one, with :func:`check` before each is taken (so a lazily loaded model, a generator's
    next checkpoint, is not loaded once the work was cancelled)."""
    iterator = iter(items)
    while True:
        check()
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield item


def running() -> int:
    """How many :func:`stoppable` blocks are running now, in every thread (0 when the engine is idle)."""
    with _lock:
        return _running


@contextlib.contextmanager
def stoppable(should_stop: Callable[[], bool] | None) -> Iterator[None]:
    """Run the block with ``should_stop`` as the stop check of :func:`check`, counted in :func:`running`."""
    global _running
    token = _SHOULD_STOP.set(should_stop)
    with _lock:
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
        _SHOULD_STOP.reset(token)
