"""ZeroGPU only where Gradio says so (``explorer.serving.gpu``), in the three places the app runs: no Space, a Space
with CPU or its own GPU (``spaces`` importable, ``SPACES_ZERO_GPU`` unset) and a ZeroGPU Space
(``SPACES_ZERO_GPU=true``). ``spaces`` is a stand-in put into ``sys.modules``; it records what it wraps.

"Runs a model" is read off the built app: an event runs a model when its handler reaches a function of
``engine.probes`` (the layer that runs models for the UI), following the names each function's code uses
(globals, closure cells, attributes of modules) through ``explorer`` code. Every such event must reach the
probes only through an ``on_gpu`` function, and no event that merely loads a model (``Services.model``:
the picker's description, slider fits, the Tokenize tab) may hold a GPU.
"""
from __future__ import annotations

import dis
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr
import pytest

import explorer.page
from explorer.serving import gpu as gpu
from support.probing_helpers import make_services

# The endpoints a person or a script calls to run a model, and the private redraw of the Attention tab.
PROBING = {"embeddings", "embeddings_over_training", "attention", "attention_refresh", "attention_export",
           "ablate_heads", "attention_over_training", "fill_mask", "fill_mask_over_training", "answer",
           "next_sentence", "classify", "tag_words", "choose", "compare", "compare_over_run", "neighbours_index",
           "neighbours", "attribute", "neuron_view", "neuron_view_refresh", "syntax_heads", "layer_probe",
           "syntax_over_training"}


class StandInSpaces(types.ModuleType):
    """``spaces`` as far as the app uses it: ``GPU(fn)`` / ``GPU(duration=...)(fn)`` wrap and record; Gradio
    calls ``gradio_auto_wrap`` on a Space (the real one leaves functions alone unless told otherwise)."""

    def __init__(self) -> None:
        super().__init__("spaces")
        self.wrapped: list[tuple[Callable[..., Any], int | None]] = []

    def GPU(self, fn: Callable[..., Any] | None = None, *, duration: int | None = None) -> Any:  # noqa: N802
        def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
            self.wrapped.append((f, duration))

            @functools.wraps(f)
            def on_zero_gpu(*args: Any, **kwargs: Any) -> Any:
                return ("on gpu", f(*args, **kwargs))

            on_zero_gpu.stand_in_gpu = True
            return on_zero_gpu
        return decorate(fn) if fn is not None else decorate

    def gradio_auto_wrap(self, fn: Any) -> Any:
        return fn


@pytest.fixture
def no_space(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "spaces", None)          # import spaces -> ImportError
    for name in ("SPACES_ZERO_GPU", "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def spaces_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInSpaces]:
    stand_in = StandInSpaces()
    monkeypatch.setitem(sys.modules, "spaces", stand_in)
    monkeypatch.setenv("SPACE_ID", "owner/bert-explorer")
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    yield stand_in


@pytest.fixture
def zero_gpu_space(spaces_module: StandInSpaces, monkeypatch: pytest.MonkeyPatch) -> StandInSpaces:
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    return spaces_module


def _double(x: int) -> int:
    return 2 * x


# --- the decorator ---------------------------------------------------------------------------

def test_no_space_decorator_is_the_identity(no_space: None) -> None:
    decorated = gpu.on_gpu(_double)
    assert decorated is _double and decorated(4) == 8 and gpu.is_on_gpu(decorated)
    assert gpu.on_gpu(duration=30)(_double) is _double
    assert not gpu.zero_gpu() and gpu.training_device() == "auto"
    assert f"{__name__}._double" in gpu.registered()


def test_cpu_or_gpu_space_does_not_wrap(spaces_module: StandInSpaces) -> None:
    """``spaces`` imports on every Space; that alone is not ZeroGPU, and a training run takes the GPU if any."""
    assert gpu.on_gpu(_double) is _double and spaces_module.wrapped == []
    assert not gpu.zero_gpu() and gpu.training_device() == "auto"


def test_zero_gpu_space_wraps_with_spaces_gpu(zero_gpu_space: StandInSpaces) -> None:
    decorated = gpu.on_gpu(_double)
    assert decorated is not _double and decorated(4) == ("on gpu", 8) and gpu.is_on_gpu(decorated)
    assert gpu.on_gpu(duration=30)(_double)(1) == ("on gpu", 2)
    assert zero_gpu_space.wrapped == [(_double, None), (_double, 30)]
    # the mark survives the wrappers outside it (friendly_errors uses functools.wraps)
    assert gpu.is_on_gpu(explorer.ui_errors.friendly_errors(decorated))
    assert not gpu.is_on_gpu(explorer.ui_errors.friendly_errors(lambda: 1))
    assert gpu.zero_gpu() and gpu.training_device() == "cpu"     # a background thread cannot hold a ZeroGPU


def test_zero_gpu_without_spaces_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "spaces", None)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    with pytest.raises(RuntimeError, match="`spaces` package cannot be imported.*unset SPACES_ZERO_GPU"):
        gpu.on_gpu(_double)


def test_gradio_decides_what_zero_gpu_is(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("true", True), ("false", False), ("1", False), ("", False)):
        monkeypatch.setenv("SPACES_ZERO_GPU", value)
        assert gpu.zero_gpu() is expected is gr.utils.is_zero_gpu_space()


# --- every event that runs a model ------------------------------------------------------------

def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _named(fn: types.FunctionType) -> list[Any]:
    """The objects ``fn``'s code (and the lambdas, comprehensions and functions nested in it) names: its
    closure cells, its globals, and the attributes of modules among them."""
    names = {name for code in _codes(fn.__code__) for name in (*code.co_names, *code.co_freevars)}
    cells = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:               # not filled yet
            pass
    found = [cells[n] if n in cells else fn.__globals__[n] for n in names if n in cells or n in fn.__globals__]
    return found + [getattr(m, n) for m in found if inspect.ismodule(m) for n in names if hasattr(m, n)]


def _path(obj: Any, reaches: Callable[[types.FunctionType], bool], stop: Callable[[Any], bool],
          seen: set[Any]) -> list[str] | None:
    """A chain of function names from ``obj`` to one that ``reaches``, through explorer code and not through
    a function ``stop`` accepts; None if there is none."""
    obj = obj.func if isinstance(obj, functools.partial) else getattr(obj, "__func__", obj)
    inner = inspect.unwrap(obj) if callable(obj) else None
    if not inspect.isfunction(inner) or stop(obj):
        return None
    if reaches(inner):
        return [f"{inner.__module__}.{inner.__qualname__}"]
    if not (inner.__module__ or "").startswith("explorer") or inner in seen:
        return None
    seen.add(inner)
    for callee in _named(inner):
        if (rest := _path(callee, reaches, stop, seen)) is not None:
            return [inner.__qualname__, *rest]
    return None


# engine.probes functions that only tokenize (the neuron view's query dropdown lists the input's tokens)
TOKENIZATION_ONLY = {"engine.probes.attention.maps.encode_input"}


def _is_probe(fn: types.FunctionType) -> bool:
    return ((fn.__module__ or "").startswith("engine.probes.")
            and f"{fn.__module__}.{fn.__qualname__}" not in TOKENIZATION_ONLY)


def _loads_a_model(fn: types.FunctionType) -> bool:
    """``services.model(...)`` or ``registry.get(...)`` in the function's own code."""
    for code in _codes(fn.__code__):
        instructions = list(dis.get_instructions(code))
        for first, second in zip(instructions, instructions[1:]):
            if (first.argval, second.argval) in (("services", "model"), ("registry", "get")) \
                    and second.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                return True
    return False


def _never(_: Any) -> bool:
    return False


def _events(services: Any) -> dict[str, Any]:
    demo = explorer.page.build_app(services)
    return {f"{block_fn.api_name}#{index}": block_fn.fn for index, block_fn in demo.fns.items()
            if block_fn.fn is not None}


@pytest.fixture(scope="module")
def app_events(tiny_tokenizer, tmp_path_factory) -> dict[str, Any]:
    return _events(make_services(tiny_tokenizer, tmp_path_factory.mktemp("runs")))


def test_every_event_that_runs_a_model_goes_through_on_gpu(app_events: dict[str, Any]) -> None:
    runs_model = {name: _path(fn, _is_probe, _never, set()) for name, fn in app_events.items()}
    runs_model = {name: path for name, path in runs_model.items() if path}
    assert {name.split("#")[0] for name in runs_model} >= PROBING        # the scan finds what we know runs one
    uncovered = {name: " > ".join(path) for name, fn in app_events.items()
                 if (path := _path(fn, _is_probe, gpu.is_on_gpu, set()))}
    assert uncovered == {}, "events that run a model without @gpu.on_gpu on the way"
    # every decorated function is a handler of such an event (nothing holds a GPU it does not use)
    decorated = {f"{inspect.unwrap(fn).__module__}.{inspect.unwrap(fn).__qualname__}"
                 for name, fn in app_events.items() if name in runs_model and gpu.is_on_gpu(fn)}
    assert decorated == {name for name in gpu.registered() if name.startswith("explorer.")}


def test_events_that_only_load_a_model_hold_no_gpu(app_events: dict[str, Any]) -> None:
    """Describing a model, fitting sliders and tokenizing call ``Services.model`` but run no model."""
    loads_only = {name for name, fn in app_events.items()
                  if _path(fn, _loads_a_model, _never, set()) and not _path(fn, _is_probe, _never, set())}
    assert {"load_model#", "model_info#", "tokenize#"} <= {name.split("#")[0] + "#" for name in loads_only}
    assert [name for name in loads_only if gpu.is_on_gpu(app_events[name])] == []


def test_on_a_zero_gpu_space_each_probing_handler_is_a_spaces_gpu_function(
        zero_gpu_space: StandInSpaces, tiny_tokenizer, tmp_path) -> None:
    """The handlers are decorated while the app is built, before launch, which is when ZeroGPU registers them."""
    events = _events(make_services(tiny_tokenizer, tmp_path / "runs"))

    def through_spaces(fn: Any) -> bool:
        while fn is not None:
            if getattr(fn, "stand_in_gpu", False):
                return True
            fn = getattr(fn, "__wrapped__", None)
        return False

    probing = {name for name, fn in events.items() if _path(fn, _is_probe, _never, set())}
    direct = {name for name in probing if through_spaces(events[name])}
    assert {name.split("#")[0] for name in direct} >= PROBING - {"attention_refresh", "neuron_view_refresh"}
    # the redraws call the Attention and neuron-view handlers, themselves spaces.GPU functions
    assert all(_path(events[name], _is_probe, through_spaces, set()) is None for name in probing)
    wrapped = {f"{f.__module__}.{f.__qualname__}" for f, _ in zero_gpu_space.wrapped}
    assert wrapped == {name for name in gpu.registered() if name.startswith("explorer.")}
