"""Demo mode (``EXPLORER_DEMO=1``): load the default model and run every tab's examples once.

Runs engine-level calls (no Gradio events) in a background thread at start, so the first
clicks in front of an audience do not pay for loading weights or the first forward passes.
A failing example is logged and skipped; warm-up never stops the app.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from engine.model.loaded_model import LoadedModel
from explorer.services import Services
from explorer.tab_registry import TABS

log = logging.getLogger("explorer.serving.warmup")
DEMO_ENV = "EXPLORER_DEMO"


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for every tab's examples that ``loaded`` can run (heads it lacks are skipped), tab by tab
    in the order of ``explorer.tab_registry.TABS``."""
    return [call for tab in TABS for call in tab.example_calls(loaded)]


def run_examples(services: Services, key: str = "default") -> list[str]:
    """Load model ``key`` and run every example once; returns the names of the calls that worked."""
    try:
        with services.probing():
            loaded = services.model(key)
    except Exception:  # noqa: BLE001 - warm-up is best effort
        log.exception("demo warm-up: could not load the %s model", key)
        return []
    if loaded.tokenizer is None:
        log.warning("demo warm-up: the %s model has no tokenizer; nothing to warm up", key)
        return []
    done = []
    for name, call in example_calls(loaded):
        try:
            with services.probing():
                call()
            done.append(name)
        except Exception:  # noqa: BLE001
            log.warning("demo warm-up: example %s failed", name, exc_info=True)
    log.info("demo warm-up: %d example calls done", len(done))
    return done


def start(services: Services) -> threading.Thread:
    """Run :func:`run_examples` in a daemon thread (startup is not delayed); returns the thread."""
    thread = threading.Thread(target=run_examples, args=(services,), name="demo-warm-up", daemon=True)
    thread.start()
    return thread
