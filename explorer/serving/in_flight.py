"""One request per intention: a visitor's heavy request sent again while the first runs or waits joins it
(docs/design/security.md, "Heavy work").

A click on a Why example already runs the explanation; *Explain* pressed then sent the very same request, which
waited at the heavy gate behind the visitor's own first one and computed it again. Here every heavy handler's
call is keyed by its visitor (the session), its endpoint and its inputs (plain values; what Gradio adds itself,
``gr.Progress``, ``gr.Request``, event data, is left out). While a call with that key runs or waits, another one
joins it: it takes no place at the gate, waits for that call and gets its result (or its error). When the first
call is cancelled or its client leaves, a joined call that is still wanted runs again itself (later ones join
that one); a joined call that is cancelled, or whose client leaves, just stops waiting.

Bounded: an entry lives only while its call runs or waits (the gate bounds those), at most ``MAX_JOINED`` calls
join one (more run as requests of their own, under the gate's limits) and at most ``MAX_ENTRIES`` entries are
kept per app (more run unjoined). A call outside a Gradio event, without a session or with inputs that are not
plain data (strings, numbers, lists, dicts) runs as before. All bookkeeping happens on the event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gradio as gr

from explorer.serving.cancellable import CANCELLED_MESSAGE, event_alive

T = TypeVar("T")
MAX_JOINED = 8               # calls joined to one call; more run as requests of their own
MAX_ENTRIES = 256            # calls in flight per app that others may join; more run unjoined
POLL_S = 0.25                # how often a joined call checks that its client is still there
INJECTED = (gr.Progress, gr.Request, gr.EventData, gr.OAuthProfile, gr.OAuthToken)   # Gradio's own arguments


class NotPlain(Exception):
    """An input that is not plain data: the call is not joined."""


def plain(value: Any) -> Hashable:
    """``value`` as a hashable, unambiguous key part: strings and numbers as they are, a list or tuple as
    ``("[]", items...)``, a dict as ``("{}", (key, value)...)`` sorted by key; anything else raises ``NotPlain``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return ("[]", *(plain(item) for item in value))
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return ("{}", *((key, plain(value[key])) for key in sorted(value)))
    raise NotPlain(type(value).__name__)


def request_key(visitor: str | None, endpoint: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any]) \
        -> Hashable | None:
    """The key of one call of ``endpoint`` by ``visitor`` with ``args`` / ``kwargs`` (Gradio's own arguments left
    out); ``None`` (never joined) without a visitor or when an input is not plain data."""
    if not visitor:
        return None
    try:
        inputs = (tuple(plain(arg) for arg in args if not isinstance(arg, INJECTED)),
                  tuple((name, plain(arg)) for name, arg in sorted(kwargs.items()) if not isinstance(arg, INJECTED)))
    except NotPlain:
        return None
    return visitor, endpoint, inputs


def is_cancellation(error: BaseException) -> bool:
    """Whether ``error`` says the call was cancelled or its client left (not that the work failed)."""
    return isinstance(error, asyncio.CancelledError) or (isinstance(error, gr.Error)
                                                         and str(getattr(error, "message", "")) == CANCELLED_MESSAGE)


@dataclass(eq=False)
class Call:
    """One call in flight: how many joined it, and once ``done``, its result or error (``stopped``: cancelled)."""

    done: asyncio.Event = field(default_factory=asyncio.Event)
    joined: int = 0
    result: Any = None
    error: BaseException | None = None
    stopped: bool = False


class InFlight:
    """The joinable calls of one app now running or waiting, by key (see the module's docstring). Use it from the
    event loop only (it holds no lock)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_joined: int = MAX_JOINED) -> None:
        self.max_entries, self.max_joined = max_entries, max_joined
        self._calls: dict[Hashable, Call] = {}

    def counts(self) -> tuple[int, int]:
        """(calls in flight, calls joined to them) now."""
        return len(self._calls), sum(call.joined for call in self._calls.values())

    async def run(self, key: Hashable | None, work: Callable[[], Awaitable[T]],
                  alive: Callable[[], bool] = lambda: True) -> T:
        """``work()``'s result, or, while a call with ``key`` runs or waits, that call's result (its error raised);
        raises ``gr.Error`` (cancelled) once ``alive()`` turns false while it waits. ``key`` ``None``: just runs."""
        while key is not None:
            call = self._calls.get(key)
            if call is None:
                if len(self._calls) >= self.max_entries:
                    break
                return await self._lead(key, work)
            if call.joined >= self.max_joined:
                break
            await self._follow(call, alive)
            if not call.stopped:
                if call.error is not None:
                    raise call.error
                return call.result
            if not alive():                                  # the first was cancelled, and this one is gone too
                raise gr.Error(CANCELLED_MESSAGE, print_exception=False)
        return await work()

    async def _lead(self, key: Hashable, work: Callable[[], Awaitable[T]]) -> T:
        call = self._calls[key] = Call()
        try:
            call.result = await work()
            return call.result
        except BaseException as error:
            call.error, call.stopped = error, is_cancellation(error)
            raise
        finally:
            if self._calls.get(key) is call:
                del self._calls[key]
            call.done.set()

    async def _follow(self, call: Call, alive: Callable[[], bool]) -> None:
        call.joined += 1
        try:
            while not call.done.is_set():
                if not alive():
                    raise gr.Error(CANCELLED_MESSAGE, print_exception=False)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(call.done.wait(), POLL_S)
        finally:
            call.joined -= 1


_TABLES: weakref.WeakKeyDictionary[gr.Blocks, InFlight] = weakref.WeakKeyDictionary()


def table_for(blocks: gr.Blocks | None) -> InFlight | None:
    """``blocks``' table of joinable calls (made on first use); ``None`` outside an app."""
    if blocks is None:
        return None
    if blocks not in _TABLES:
        _TABLES[blocks] = InFlight()
    return _TABLES[blocks]


def joined(served: Callable[..., Awaitable[Any]], endpoint: str) -> Callable[..., Awaitable[Any]]:
    """The ``async`` handler ``served`` of ``endpoint``, whose call joins the same visitor's identical call in flight
    (see the module's docstring). Parameters and docstring stay ``served``'s."""
    identity = (endpoint, id(served))              # two handlers never share a key, whatever their names

    @functools.wraps(served)
    async def joining(*args: Any, **kwargs: Any) -> Any:
        from gradio.context import LocalContext

        table = table_for(LocalContext.blocks.get(None))
        request = LocalContext.request.get(None)
        key = request_key(getattr(request, "session_hash", None), identity, args, kwargs)
        if table is None or key is None:
            return await served(*args, **kwargs)
        return await table.run(key, lambda: served(*args, **kwargs), event_alive())
    return joining
