"""Demo mode (``EXPLORER_DEMO=1``): load the default model and run every tab's examples once.

Runs engine-level calls (no Gradio events) in a background thread at start, so the first
clicks in front of an audience do not pay for loading weights or the first forward passes.
A failing example is logged and skipped; warm-up never stops the app.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from engine.probes import inference
from engine.checkpoints.hf_format import LoadedModel
from explorer.services import Services

log = logging.getLogger("explorer.warmup")
DEMO_ENV = "EXPLORER_DEMO"


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each tab's examples that ``loaded`` can run (heads it lacks are skipped)."""
    from explorer.attention import tab as attention_tab
    from explorer.embeddings import tab as embeddings_tab
    from explorer.fill_mask import tab as fill_mask_tab
    from explorer.qa import examples as qa_examples
    from explorer.tokenize import tab as tokenize_tab

    calls: list[tuple[str, Callable[[], object]]] = []
    for i, (text, pair) in enumerate(tokenize_tab.EXAMPLES):
        calls.append((f"tokenize {i}", lambda t=text, p=pair: inference.tokenize(loaded, t, p or None)))
    for i, (text, pair) in enumerate(embeddings_tab.EXAMPLES):
        calls.append((f"embeddings {i}", lambda t=text, p=pair: inference.embeddings(loaded, t, p or None)))
    for i, (text, pair) in enumerate(attention_tab.EXAMPLES):
        calls.append((f"attention {i}", lambda t=text, p=pair: inference.attention(loaded, t, p or None)))
    if "mlm" in loaded.heads:
        mask = fill_mask_tab.mask_token_of(loaded)
        for i, (text, targets) in enumerate(fill_mask_tab.EXAMPLES):
            calls.append((f"fill_mask {i}", lambda t=text, g=targets: inference.fill_mask(
                loaded, fill_mask_tab.prepare_text(t, mask), top_k=5, targets=fill_mask_tab.parse_targets(g))))
    if "qa" in loaded.heads:
        for i, (question, context) in enumerate(qa_examples.EXAMPLES):
            calls.append((f"answer {i}", lambda q=question, c=context: inference.answer(loaded, q, c)))
    from explorer.heads import tab as heads_tab     # the Heads tab's sections, for the heads the model has
    calls += heads_tab.example_calls(loaded)
    text, pair = attention_tab.EXAMPLES[0]                 # the neuron view, and the Why tab's default example
    calls.append(("neuron_view 0", lambda: inference.neuron_view(loaded, text, pair or None, 0, 0, 1)))
    if "mlm" in loaded.heads:                              # (also imports captum: ~1.5 s off the first click)
        from explorer.why import actions as why_actions
        task, why_text = why_actions.EXAMPLES[0][:2]
        calls.append(("attribute 0", lambda: inference.attribute(loaded, task, why_text)))
    return calls


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
