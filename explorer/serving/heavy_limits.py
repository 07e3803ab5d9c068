"""How much heavy work may run and wait, for everyone and per client (docs/design/security.md, "Heavy work").

Heavy requests (attribution, the neighbours index, comparisons, over-training views, head ablation) do not wait
in Gradio's queue: there they counted toward its single ``max_size``, and a pile of them made ``/tokenize``
answer "Queue is full". Gradio starts them at once (their group has no concurrency limit) and each one's
:func:`gated` handler asks this app's :class:`HeavyGate` for a turn, in the order they came:

* at most ``running`` at once (``EXPLORER_HEAVY_CONCURRENCY``, default 1), the others wait here;
* at most ``waiting`` wait (``EXPLORER_HEAVY_QUEUE``, default 8; 4 in public mode): one more is refused at
  once with a sentence, so Gradio's queue stays free for light requests;
* at most ``per_client`` running or waiting per client (``EXPLORER_HEAVY_PER_CLIENT``; default 1 in public
  mode, no limit in private mode). A client is a session (a page load, a ``gradio_client.Client``).

A request that is cancelled or whose client goes away while it waits leaves the line; one that runs frees
its turn only once its work has stopped (``explorer/serving/cancellable.py``). A request that waits is told how
many of other clients' run or wait before it (its client's own are not counted); a client's identical request
never reaches the gate while the first runs or waits: it joins that one (``explorer/serving/in_flight.py``).
All bookkeeping happens on Gradio's event loop (the handlers are ``async``), so a count and the change it
allows happen together.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from explorer.serving.access import PUBLIC_ENV, env_flag, env_int
from explorer.serving.cancellable import CANCELLED_MESSAGE, event_alive
from explorer.models.settings import heavy_concurrency

QUEUE_ENV = "EXPLORER_HEAVY_QUEUE"
PER_CLIENT_ENV = "EXPLORER_HEAVY_PER_CLIENT"
DEFAULT_WAITING = {False: 8, True: 4}                  # private / public mode
DEFAULT_PER_CLIENT = {False: 0, True: 1}               # 0: no per-client limit
POLL_S = 0.25                                          # how often a waiting request checks its client is there


def _whole(env: Mapping[str, str], name: str, default: int) -> int:
    return env_int(env, name, default, minimum=0)


@dataclass(frozen=True)
class HeavyLimits:
    """How many heavy requests run at once, how many may wait, and how many one client may have in all
    (running or waiting; 0: no per-client limit)."""

    running: int = 1
    waiting: int = DEFAULT_WAITING[False]
    per_client: int = DEFAULT_PER_CLIENT[False]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HeavyLimits:
        """The limits ``EXPLORER_HEAVY_CONCURRENCY``, ``EXPLORER_HEAVY_QUEUE`` and ``EXPLORER_HEAVY_PER_CLIENT``
        describe (defaults by ``EXPLORER_PUBLIC``); a queue or per-client value that is not a whole number ≥ 0
        raises ``ValueError`` (the app does not start with it)."""
        env = os.environ if environ is None else environ
        public = env_flag(PUBLIC_ENV, env)
        return cls(running=heavy_concurrency(env), waiting=_whole(env, QUEUE_ENV, DEFAULT_WAITING[public]),
                   per_client=_whole(env, PER_CLIENT_ENV, DEFAULT_PER_CLIENT[public]))


@dataclass(eq=False)
class Ticket:
    """One heavy request's place: its client (``None``: unknown, never limited per client) and whether it runs."""

    client: str | None
    started: asyncio.Event = field(default_factory=asyncio.Event)


class HeavyGate:
    """The heavy requests of one app: those running and those waiting, first come first served.
    Use it from the event loop only (it holds no lock)."""

    def __init__(self, limits: HeavyLimits) -> None:
        self.limits = limits
        self._running: list[Ticket] = []
        self._waiting: deque[Ticket] = deque()

    def counts(self) -> tuple[int, int]:
        """(running, waiting) now."""
        return len(self._running), len(self._waiting)

    def admit(self, client: str | None) -> Ticket:
        """A place for a new request of ``client``: running at once when a slot is free, else at the end of the
        line; raises ``gr.Error`` (saying why and what to do) when the client or the line is full."""
        mine = sum(t.client == client for t in (*self._running, *self._waiting)) if client is not None else 0
        if self.limits.per_client and mine >= self.limits.per_client:
            raise gr.Error(f"You already have {_requests(mine)} running or waiting (attribution, comparisons, "
                           f"index builds and over-training views: at most {self.limits.per_client} per visitor "
                           "here). Wait for it to finish, or stop it, then try again.", print_exception=False)
        ticket = Ticket(client)
        if len(self._running) < self.limits.running:
            self._start(ticket)
        elif len(self._waiting) >= self.limits.waiting:
            raise gr.Error(f"{_requests(len(self._waiting))} already waiting for the heavy tools (attribution, "
                           "comparisons, index builds, over-training views); try again in a moment. The other "
                           "tabs answer as usual.", print_exception=False)
        else:
            self._waiting.append(ticket)
        return ticket

    async def turn(self, ticket: Ticket, alive: Callable[[], bool]) -> None:
        """Wait until ``ticket`` runs; raises ``gr.Error`` (cancelled) once ``alive()`` turns false first."""
        while not ticket.started.is_set():
            if not alive():
                raise gr.Error(CANCELLED_MESSAGE, print_exception=False)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(ticket.started.wait(), POLL_S)

    def release(self, ticket: Ticket) -> None:
        """``ticket`` leaves (finished, failed, cancelled or refused while waiting); the next in line starts."""
        if ticket in self._running:
            self._running.remove(ticket)
        elif ticket in self._waiting:
            self._waiting.remove(ticket)
        while self._waiting and len(self._running) < self.limits.running:
            self._start(self._waiting.popleft())

    @contextlib.asynccontextmanager
    async def slot(self, client: str | None, alive: Callable[[], bool]) -> AsyncIterator[None]:
        """Admitted, then the request's turn (see :meth:`admit` and :meth:`turn`); released on the way out. A request
        that waits behind other visitors' is told how many (its client's own are not counted: none, no message)."""
        ticket = self.admit(client)
        try:
            ahead = self.others_ahead(ticket)
            if ahead:
                gr.Info(f"Waiting for the heavy tools: {_requests(ahead)} ahead of yours.")
            await self.turn(ticket, alive)
            yield
        finally:
            self.release(ticket)

    def others_ahead(self, ticket: Ticket) -> int:
        """How many requests of other clients run or wait before ``ticket`` (0 once it runs; a request of an
        unknown client counts every one)."""
        if ticket.started.is_set() or ticket not in self._waiting:
            return 0
        ahead = [*self._running, *list(self._waiting)[:self._waiting.index(ticket)]]
        return sum(ticket.client is None or other.client != ticket.client for other in ahead)

    def _start(self, ticket: Ticket) -> None:
        self._running.append(ticket)
        ticket.started.set()


def _requests(count: int) -> str:
    return f"{count} heavy request" + ("" if count == 1 else "s")


_GATES: weakref.WeakKeyDictionary[gr.Blocks, HeavyGate] = weakref.WeakKeyDictionary()


def install(blocks: gr.Blocks, limits: HeavyLimits) -> HeavyGate:
    """Give ``blocks`` (the app) a gate with ``limits``; its heavy handlers use it from then on."""
    _GATES[blocks] = gate = HeavyGate(limits)
    return gate


def gate_for(blocks: gr.Blocks | None) -> HeavyGate | None:
    """``blocks``' gate (one with the environment's limits if none was installed); ``None`` outside an app."""
    if blocks is None:
        return None
    if blocks not in _GATES:
        install(blocks, HeavyLimits.from_env())
    return _GATES[blocks]


def client_of(request: gr.Request | None) -> str | None:
    """Who sent ``request``, for the per-client limit: its session (``None`` outside a request)."""
    return getattr(request, "session_hash", None) or None


def gated(served: Callable[..., Any]) -> Callable[..., Any]:
    """The ``async`` heavy handler ``served``, run only in its turn at its app's gate (see the module's
    docstring); called outside a Gradio event it runs at once. Parameters and docstring stay ``served``'s."""
    @functools.wraps(served)
    async def admitted(*args: Any, **kwargs: Any) -> Any:
        from gradio.context import LocalContext

        gate = gate_for(LocalContext.blocks.get(None))
        if gate is None:
            return await served(*args, **kwargs)
        async with gate.slot(client_of(LocalContext.request.get(None)), event_alive()):
            return await served(*args, **kwargs)
    return admitted
