"""The heavy gate's message counts only other visitors' requests: a visitor is never told that its own request is
"ahead of yours" (the gate's limits and line: tests/app/test_heavy_limits.py)."""
from __future__ import annotations

import asyncio

from explorer.serving.heavy_limits import HeavyGate, HeavyLimits


def test_only_other_visitors_requests_count_as_ahead() -> None:
    gate = HeavyGate(HeavyLimits(running=1, waiting=4))
    mine, theirs, my_next, unknown = gate.admit("a"), gate.admit("b"), gate.admit("a"), gate.admit(None)
    assert gate.others_ahead(mine) == 0                              # it runs
    assert gate.others_ahead(theirs) == 1                            # mine runs before it
    assert gate.others_ahead(my_next) == 1                           # theirs; my own running one is not counted
    assert gate.others_ahead(unknown) == 3                           # an unknown client: every one counts
    gate.release(mine)
    assert gate.others_ahead(my_next) == 1 and gate.others_ahead(theirs) == 0


def test_a_request_waiting_behind_its_own_visitor_only_is_told_nothing(capsys) -> None:
    async def scenario() -> None:
        gate = HeavyGate(HeavyLimits(running=1, waiting=4))
        first = gate.admit("a")

        async def wait_in_line(client: str) -> None:
            async with gate.slot(client, lambda: True):
                pass

        waiting = [asyncio.ensure_future(wait_in_line(client)) for client in ("a", "b")]
        await asyncio.sleep(0.01)
        assert gate.counts() == (1, 2)
        gate.release(first)
        await asyncio.wait(waiting)
        assert gate.counts() == (0, 0)

    asyncio.run(scenario())
    told = capsys.readouterr().out          # gr.Info prints outside an event; in the browser it is a toast
    assert told.count("ahead of yours") == 1                         # a's second is told nothing
    assert "Waiting for the heavy tools: 2 heavy requests ahead of yours." in told     # b: both of a's
