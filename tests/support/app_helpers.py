"""Serving the app in-process for tests: a free loopback port, launch, a gradio_client, close."""
from __future__ import annotations

import contextlib
import socket
from typing import Any, Iterator

import gradio as gr
from gradio_client import Client

import explorer.page


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLIENT_TIMEOUT_S = 120.0


def launch(demo: gr.Blocks, **options: Any) -> None:
    """``demo.launch(**options)`` on a free loopback port, without blocking; the server answers once it returns.

    ``_frontend=False`` skips Gradio's reachability probe (``gradio.networking.url_ok``: a HEAD of the page
    with a 3-second timeout, whose failure aborts the launch). On a busy machine rendering the whole app's
    page takes longer than that, and the tests failed at set-up. Nothing is lost: ``launch`` has already
    waited, with no timeout, for the server's own ``startup-events`` request before that probe."""
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True,
                _frontend=False, **options)


@contextlib.contextmanager
def serve(demo: gr.Blocks) -> Iterator[Client]:
    """Launch ``demo`` on loopback without blocking, yield a client for it, close it afterwards. The client waits
    up to ``CLIENT_TIMEOUT_S`` for an answer (httpx's 5 s default is too short on a machine busy with other work)."""
    launch(demo, theme=explorer.page.THEME, css=explorer.page.CSS)
    try:
        yield Client(demo.local_url, verbose=False, httpx_kwargs={"timeout": CLIENT_TIMEOUT_S})
    finally:
        demo.close()


def slowed_attribution(monkeypatch: Any, step_s: float) -> list[int]:
    """Slow attribution down (one point per batch, ``step_s`` each); the returned list counts its forward passes."""
    import time

    from engine.probes.attribution import methods as attribution

    count = [0]
    real_pick = attribution.pick

    def slow_pick(*args: Any, **kwargs: Any) -> Any:
        time.sleep(step_s)
        count[0] += 1
        return real_pick(*args, **kwargs)

    monkeypatch.setattr(attribution, "BATCH_TOKENS", 1)
    monkeypatch.setattr(attribution, "pick", slow_pick)
    return count
