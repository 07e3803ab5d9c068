"""Hugging Face ``spaces.GPU`` where the ``spaces`` package exists, a no-op everywhere else.

On a ZeroGPU Space only functions decorated with ``spaces.GPU`` see a GPU, each for one call;
a background thread cannot hold one, so the training worker stays on the CPU there. This shim
lets the app decorate its inference handlers without depending on ``spaces``.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# The Blocks events that run a model for a user (the probing tabs); training stays on the CPU.
INFERENCE_API_NAMES = tuple(f"{name}{suffix}" for name in ("embeddings", "attention", "fill_mask", "answer")
                            for suffix in ("", "_submit", "_example_run")) + (
    "embeddings_over_training", "attention_over_training", "ablate_heads", "fill_mask_over_training")
# the Heads tab's sections
INFERENCE_API_NAMES += tuple(f"{name}{suffix}" for name in ("next_sentence", "classify", "tag_words", "choose")
                             for suffix in ("", "_submit", "_example_run"))


def spaces_module() -> Any | None:
    """The ``spaces`` package if it can be imported, else None (looked up on every call)."""
    try:
        return importlib.import_module("spaces")
    except ImportError:
        return None


def gpu(fn: F, duration: int | None = None) -> F:
    """``spaces.GPU(fn)`` (or ``spaces.GPU(duration=...)(fn)``) when ``spaces`` exists; else ``fn`` itself."""
    spaces = spaces_module()
    if spaces is None or not hasattr(spaces, "GPU"):
        return fn
    return spaces.GPU(duration=duration)(fn) if duration is not None else spaces.GPU(fn)


def wrap_handlers(demo: Any, api_names: Iterable[str] = INFERENCE_API_NAMES, duration: int | None = None) -> list[str]:
    """Decorate the handlers of ``demo``'s events named in ``api_names`` with :func:`gpu`.

    Returns the api names wrapped (empty when ``spaces`` is absent: nothing changes then).
    Call it after the app is built and before it is launched.
    """
    if spaces_module() is None:
        return []
    wanted = set(api_names)
    wrapped = []
    for block_fn in demo.fns.values():
        if block_fn.api_name in wanted and block_fn.fn is not None and not getattr(block_fn, "_explorer_gpu", False):
            block_fn.fn = gpu(block_fn.fn, duration)
            block_fn._explorer_gpu = True
            wrapped.append(block_fn.api_name)
    return wrapped


def training_device() -> str:
    """The background training run's device: ``cpu`` where ``spaces`` exists (a thread cannot hold
    a ZeroGPU), else ``auto`` (CUDA when available)."""
    return "cpu" if spaces_module() is not None else "auto"
