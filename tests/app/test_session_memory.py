"""Memory per visitor is bounded (docs/design/forward-cache.md, *Per visitor*): 60 new sessions in private mode
(50 in public mode, with a capacity of 20), each one ``/embeddings`` call on a 512-token text with the forward cache
off, grow the served app's memory by at most ``GROWTH_BOUND_MB``; Gradio holds no more sessions than
``EXPLORER_MAX_SESSIONS``;
the Embeddings tab keeps a small key per session, never the arrays; a page that closes gives back its forwards.
(Before: each such session kept its whole result, ~15 MB, and Gradio kept up to 10,000 sessions.)"""
from __future__ import annotations

import pytest

from bench.session_memory import grow
from engine.probes.forward_cache import ForwardCache
from explorer.serving import sessions as sessions

SESSIONS = 60                  # at the old ~15 MB a session, 900 MB: far over the bound
PUBLIC_SESSIONS = 50           # public mode: 2.5 times its capacity of 20, so Gradio must let sessions go
GROWTH_BOUND_MB = 250          # the bound with the forward cache off (measured: README, BENCHMARKS)


@pytest.mark.parametrize("public", [False, True], ids=["private", "public"])
def test_new_sessions_on_512_token_texts_stay_within_the_bound(public: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sessions.SESSIONS_ENV, "20" if public else "")      # public: fewer than the sessions opened
    found = grow(PUBLIC_SESSIONS if public else SESSIONS, tokens=512, public=public, cache_mb=0, reference=False)
    assert found["sessions_mb"] <= GROWTH_BOUND_MB, found
    assert found["held_sessions"] <= found["capacity"] == (20 if public else 1000), found


def test_the_session_capacity_follows_the_mode_and_the_setting() -> None:
    assert sessions.session_capacity({}) == 1000
    assert sessions.session_capacity({"EXPLORER_PUBLIC": "1"}) == 200
    assert sessions.session_capacity({"EXPLORER_MAX_SESSIONS": "7"}) == 7
    with pytest.raises(ValueError, match="EXPLORER_MAX_SESSIONS must be at least 1"):
        sessions.session_capacity({"EXPLORER_MAX_SESSIONS": "0"})
    assert sessions.ceiling_mb(200, 512) == 200 * sessions.SESSION_MB + 512


def test_a_closed_page_gives_back_its_kept_forwards() -> None:
    """``sessions.install`` wires ``demo.unload``; what it runs drops that visitor's entries only."""
    import gradio as gr

    class Services:
        forward_cache = ForwardCache(max_bytes=10**6)

    model = ForwardCache()                                   # any object a weak reference can name
    for visitor in ("left", "stays"):
        Services.forward_cache.put(visitor, model, ("embeddings", "text"), {"x": 1}, nbytes=10)
    with gr.Blocks(analytics_enabled=False) as demo:
        sessions.install(demo, Services)
    unloads = [fn for fn in demo.fns.values() if any(t[1] == "unload" for t in fn.targets)]
    assert len(unloads) == 1
    unloads[0].fn(gr.Request(session_hash="left"))
    assert Services.forward_cache.get("left", model, ("embeddings", "text")) is None
    assert Services.forward_cache.get("stays", model, ("embeddings", "text")) == {"x": 1}
