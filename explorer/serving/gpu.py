"""ZeroGPU where Gradio says the app runs on it; nothing anywhere else.

A ZeroGPU Space (Gradio's own test: ``gradio.utils.is_zero_gpu_space()``, i.e. ``SPACES_ZERO_GPU=true``)
lends a GPU only to functions decorated with ``spaces.GPU``, for one call each, and registers those
functions when the app launches: a Space that launches with none is stopped. So every event handler that
runs a model goes through :func:`on_gpu` while its tab's ``build`` wires it, before ``launch``: the
default of ``explorer.endpoints.endpoint`` (``gpu=False`` for a handler that runs none):

    endpoint(button.click, run, [picker.dropdown, text], [plot], api_name="fill_mask")

The environment is read when the decorator is applied, as ``spaces`` itself does: a Space sets it before
the process starts, and the app builds its handlers after that. On ZeroGPU the decorator is
``spaces.GPU`` (applied then and there); everywhere else (a laptop, a CPU Space, a Space with its own
GPU) it returns the function itself. Either way it marks the function (:func:`is_on_gpu`) and notes its
name (:func:`registered`), so a test can check that every event that runs a model is covered.

A background thread cannot hold a ZeroGPU, so a training run stays on the CPU there; on any other
machine it takes ``auto`` (CUDA when torch sees a GPU, a GPU Space's included).
"""
from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

from gradio.utils import is_zero_gpu_space

F = TypeVar("F", bound=Callable[..., Any])

MARK = "__explorer_on_gpu__"        # set on a decorated function (functools.wraps copies it to wrappers)
_REGISTERED: set[str] = set()       # "<module>.<qualname>" of every function decorated so far


def zero_gpu() -> bool:
    """True on a ZeroGPU Space (``SPACES_ZERO_GPU=true``, as Gradio tells), read on every call."""
    return is_zero_gpu_space()


def _spaces_gpu() -> Callable[..., Any]:
    try:
        return importlib.import_module("spaces").GPU
    except (ImportError, AttributeError) as exc:
        raise RuntimeError("SPACES_ZERO_GPU=true says this is a ZeroGPU Space, but the `spaces` package cannot be "
                           "imported (Hugging Face installs it on every ZeroGPU Space): unset SPACES_ZERO_GPU "
                           "when not on one.") from exc


@overload
def on_gpu(fn: F, *, duration: int | None = None) -> F: ...
@overload
def on_gpu(fn: None = None, *, duration: int | None = None) -> Callable[[F], F]: ...


def on_gpu(fn: F | None = None, *, duration: int | None = None) -> F | Callable[[F], F]:
    """Mark ``fn`` as running a model: ``spaces.GPU(fn)`` (``duration`` seconds at most, when given) on a
    ZeroGPU Space, ``fn`` itself anywhere else. Use as ``@on_gpu`` or ``@on_gpu(duration=120)``."""

    def decorate(f: F) -> F:
        setattr(f, MARK, True)
        _REGISTERED.add(f"{f.__module__}.{f.__qualname__}")
        if not zero_gpu():
            return f
        gpu = _spaces_gpu()
        wrapped = gpu(f) if duration is None else gpu(duration=duration)(f)
        with contextlib.suppress(AttributeError, TypeError):
            setattr(wrapped, MARK, True)
        return wrapped

    return decorate(fn) if fn is not None else decorate


def is_on_gpu(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``, or a function it wraps (``__wrapped__``, as ``functools.wraps`` leaves), went
    through :func:`on_gpu`."""
    seen: set[int] = set()
    current: Any = fn
    while current is not None and id(current) not in seen:
        if getattr(current, MARK, False):
            return True
        seen.add(id(current))
        current = getattr(current, "__wrapped__", None)
    return False


def registered() -> frozenset[str]:
    """``<module>.<qualname>`` of every function :func:`on_gpu` has decorated in this process."""
    return frozenset(_REGISTERED)


def training_device() -> str:
    """The background training run's device: ``cpu`` on a ZeroGPU Space (a thread cannot hold a ZeroGPU),
    else ``auto`` (CUDA when torch sees a GPU)."""
    return "cpu" if zero_gpu() else "auto"
