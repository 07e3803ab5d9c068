"""What the app keeps per visitor, bounded (docs/design/forward-cache.md, *Per visitor*).

A visitor is a Gradio session (a page load, a ``gradio_client.Client``, an HTTP caller's ``session_hash``). Per
session the server keeps Gradio's own copy of the page's component settings (about 0.8 MB for this app's ~480
components), the tabs' small ``gr.State`` keys (never arrays: the Embeddings tab keeps a ``ShownInput``) and
its share of the forward cache (at most ``ENTRIES_PER_VISITOR`` entries, every visitor together within
``EXPLORER_FORWARD_CACHE_MB``). Gradio 6 would also copy every input and output value a session was last sent
into that session's settings (for deep links, which this app does not offer: about 3 MB a session after one
512-token Embeddings answer); :func:`keep_no_values` turns that off. So the bound is set by how many sessions
Gradio holds: ``EXPLORER_MAX_SESSIONS`` (``launch(state_session_capacity=...)``; default 1,000 in private mode,
200 in public mode; the least recently used session goes first), and a page that closes gives back its
forward-cache entries at once (``demo.unload``). Gradio drops a closed page's ``gr.State`` values an hour later.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import gradio as gr

from explorer.serving.access import PUBLIC_ENV, env_flag, env_int

SESSIONS_ENV = "EXPLORER_MAX_SESSIONS"
DEFAULT_SESSIONS = {False: 1000, True: 200}        # private / public mode
SESSION_MB = 1.0                                   # measured: Gradio's per-session page state, ~0.8 MB, rounded up


def session_capacity(environ: Mapping[str, str] | None = None) -> int:
    """How many sessions Gradio keeps (``EXPLORER_MAX_SESSIONS``, at least 1; by mode when unset)."""
    env = os.environ if environ is None else environ
    return env_int(env, SESSIONS_ENV, DEFAULT_SESSIONS[env_flag(PUBLIC_ENV, env)], minimum=1)


def ceiling_mb(capacity: int, forward_cache_mb: float) -> float:
    """The most the visitors together hold (MB): ``capacity`` sessions of ``SESSION_MB`` plus the forward cache."""
    return capacity * SESSION_MB + forward_cache_mb


def keep_no_values() -> None:
    """Gradio keeps no copy of the values a session was sent or sent (``SessionState._update_value_in_config``
    does nothing: it only feeds ``/gradio_api/deep_link``, which saves a session's values for a share link that
    this app does not offer). Components and ``gr.State`` values are kept as before. Idempotent."""
    from gradio.state_holder import SessionState

    if not getattr(SessionState._update_value_in_config, "_keeps_nothing", False):
        def _update_value_in_config(self: Any, key: int, value: Any) -> None:
            return None

        _update_value_in_config._keeps_nothing = True           # type: ignore[attr-defined]
        SessionState._update_value_in_config = _update_value_in_config   # type: ignore[method-assign]


def install(demo: Any, services: Any) -> None:
    """On ``demo`` (inside its ``gr.Blocks``): a page that closes gives back its forward-cache entries at once;
    Gradio keeps no copy of a session's values (:func:`keep_no_values`)."""
    keep_no_values()
    def page_closed(request: gr.Request) -> None:
        visitor = str(getattr(request, "session_hash", None) or "")
        if visitor:
            services.forward_cache.forget(visitor)

    demo.unload(page_closed)
