"""Memory per visitor (issue 45): how much the served app's RSS grows when N new sessions (visitors) each make one
``/embeddings`` call on a 512-token text, against the same N calls made by one session (the reference, measured in
the same run, on the same served app). With the forward cache off (``EXPLORER_FORWARD_CACHE_MB=0``, the default
here) nothing may be kept per session but Gradio's own page state and the tabs' small keys
(docs/design/forward-cache.md, "Per visitor").

The app is built and launched as ``app.py`` does (``create_app``, ``launch_options``: the session capacity
included) on loopback in this process; each call is plain HTTP on the browser queue's route (POST
``/gradio_api/call/embeddings`` with the session's ``session_hash``, then GET the event's stream to its end).

Usage: python bench/session_memory.py [--sessions 100] [--public] [--cache-mb 0] [--tokens 512]
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.explorer_scale import text_of  # noqa: E402  (the same texts: one common word = one piece)

def rss_mb() -> float:
    """This process's resident memory now (MB), after a garbage collection."""
    gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def launched(demo: Any, options: dict[str, Any]) -> Iterator[str]:
    """``demo`` launched with ``options`` (``app.launch_options``) on a free loopback port, without blocking: its
    URL; closed afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = {k: v for k, v in options.items() if k != "server_name"}
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                _frontend=False, **options)
    try:
        yield demo.local_url
    finally:
        demo.close()


def call(http: Any, base: str, session: str, text: str) -> None:
    """One ``/embeddings`` call in ``session`` on the browser queue's route, read to its end."""
    data = ["default", text, "", 1, "output", "all"]
    event = http.post(f"{base}gradio_api/call/embeddings", json={"data": data, "session_hash": session})
    event.raise_for_status()
    body = http.get(f"{base}gradio_api/call/embeddings/{event.json()['event_id']}").content
    if b"event: complete" not in body:
        raise RuntimeError(f"/embeddings did not complete: {body[:300]!r}")


def grow(sessions: int, tokens: int, public: bool, cache_mb: int, reference: bool = True) -> dict[str, float]:
    """Serve the app; the RSS growth (MB) of ``sessions`` new sessions' calls and (``reference``) of as many
    calls in one session, and how many sessions Gradio holds afterwards."""
    import httpx

    import app
    from explorer.serving.access import AccessPolicy
    from explorer.forward_cache import cache_from_env
    from explorer.services import default_services

    env = {**os.environ, "EXPLORER_FORWARD_CACHE_MB": str(cache_mb), "EXPLORER_PUBLIC": "1" if public else "0"}
    services = default_services(runs_root=Path(tempfile.mkdtemp(prefix="session-memory-")))
    services.forward_cache, services.access = cache_from_env(env), AccessPolicy.from_env(env)   # this run's settings
    demo = app.create_app(services, env)
    with launched(demo, app.launch_options(env)) as base, httpx.Client(timeout=600) as http:
        for i in range(3):                                          # warm: the model, the first allocations
            call(http, base, f"warm-{i}", text_of(tokens, 900 + i))
        start = rss_mb()
        for i in range(sessions):
            call(http, base, f"visitor-{i}", text_of(tokens, i))
        after_sessions = rss_mb()
        for i in range(sessions if reference else 0):
            call(http, base, "one-visitor", text_of(tokens, 5000 + i))
        after_one = rss_mb()
        held = len(demo.state_holder.session_data)
    if services.worker is not None:
        services.worker.close()
    return {"sessions_mb": after_sessions - start, "one_session_mb": after_one - after_sessions,
            "held_sessions": float(held), "capacity": float(demo.state_session_capacity)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--public", action="store_true")
    parser.add_argument("--cache-mb", type=int, default=0)
    args = parser.parse_args()
    found = grow(args.sessions, args.tokens, args.public, args.cache_mb)
    mode = "public" if args.public else "private"
    print(f"{args.sessions} new sessions x 1 /embeddings at {args.tokens} tokens, {mode} mode, forward cache "
          f"{args.cache_mb} MB (session capacity {found['capacity']:.0f}; Gradio holds {found['held_sessions']:.0f})")
    print(f"  RSS growth, {args.sessions} new sessions: {found['sessions_mb']:8.1f} MB "
          f"({found['sessions_mb'] / args.sessions:.2f} MB a session)")
    print(f"  RSS growth, the same calls in one session (reference): {found['one_session_mb']:8.1f} MB")
    print(f"  ratio new sessions / one session: "
          f"{found['sessions_mb'] / max(found['one_session_mb'], 1.0):.1f} (the one-session growth floored at 1 MB)")


if __name__ == "__main__":
    main()
