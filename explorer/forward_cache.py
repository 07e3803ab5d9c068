"""The app's cached forwards: who is asking (the Gradio session) and how much may be kept (a setting).

The store itself is ``engine.probes.forward_cache.ForwardCache`` (plain data, no Gradio). This module only
reads ``EXPLORER_FORWARD_CACHE_MB`` (default 512; ``0`` keeps nothing) and names the visitor of the request
being served (``gr.Request.session_hash``, read from Gradio's request context, so no endpoint's parameters
change); outside a request (Python, the demo warm-up) the visitor is ``""``. Each visitor keeps at most
``ENTRIES_PER_VISITOR`` inputs. ``cached`` computes on a miss; ``lookup`` and ``keep`` are its two halves, for a tab
that keeps only part of what its first call returns (QA keeps its windows' logits). Design:
docs/design/forward-cache.md.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from engine.probes.forward_cache import ForwardCache
from explorer.models.settings import env_amount

CACHE_MB_ENV = "EXPLORER_FORWARD_CACHE_MB"
DEFAULT_CACHE_MB = 512
ENTRIES_PER_VISITOR = 6        # inputs one visitor keeps (each tab's last few), whatever their size
T = TypeVar("T")


def cache_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The bound in bytes: ``$EXPLORER_FORWARD_CACHE_MB`` (MiB, default 512; an unreadable value keeps it)."""
    env = os.environ if environ is None else environ
    return int(env_amount(env, CACHE_MB_ENV, DEFAULT_CACHE_MB) * 2**20)


def cache_from_env(environ: Mapping[str, str] | None = None) -> ForwardCache:
    """A cache with the environment's bound and ``ENTRIES_PER_VISITOR`` entries per visitor."""
    return ForwardCache(max_bytes=cache_bytes(environ), per_visitor=ENTRIES_PER_VISITOR)


def visitor() -> str:
    """The Gradio session of the request being served, ``""`` outside one."""
    try:
        from gradio.context import LocalContext
    except ImportError:                                             # the engine used without the app
        return ""
    request = LocalContext.request.get(None)
    return str(getattr(request, "session_hash", None) or "")


def cached(cache: ForwardCache, model: object, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``'s result for ``key`` on ``model``, computed once per visitor while it stays in ``cache``."""
    return cache.get_or_compute(visitor(), model, key, compute)


def lookup(cache: ForwardCache, model: object, key: Hashable) -> Any | None:
    """What the visitor of this request keeps for ``key`` on ``model``, else None."""
    return cache.get(visitor(), model, key)


def keep(cache: ForwardCache, model: object, key: Hashable, value: Any) -> bool:
    """Keep ``value`` for ``key`` on ``model`` for this request's visitor; False when it alone passes the bound."""
    return cache.put(visitor(), model, key, value)
