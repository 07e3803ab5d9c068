"""The weight files of a Hugging Face folder: ``model.safetensors``, sharded safetensors or a weights-only
``pytorch_model.bin``, read whole or, with ``meta=True``, as names, shapes and dtypes only, or one tensor at a
time (:func:`each_tensor`, what loading uses: the model's memory plus one tensor, not a second whole model).

The header-only read lets ``hf_format.load_directory`` check a folder against its ``config.json`` before it
spends memory (``engine.checkpoints.model_fit``): safetensors headers give every tensor's name, shape and
dtype without reading its data (``safe_open`` also checks that the header's offsets fit the file), and a
``.bin`` is read with ``torch.load(weights_only=True, map_location="meta")``. Nothing is ever unpickled
beyond plain tensors.
"""
from __future__ import annotations

import json
import pickle
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from engine.regular_files import open_regular, read_text, require_regular

MAX_INDEX_BYTES = 64 << 20
REOPEN_BYTES = 64 << 20
"""``each_tensor`` opens a file again after reading this many bytes of it (what stays mapped meanwhile)."""
# safetensors' dtype names -> torch's (only the shape matters for a check; unknown ones read as float32)
_SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


def read_weights(directory: Path, meta: bool = False) -> dict[str, torch.Tensor]:
    """The weight tensors of an HF directory: safetensors (single or sharded) or a weights-only .bin.

    With ``meta=True`` every tensor is on the ``meta`` device: names, shapes and dtypes, no data read.
    ``ValueError`` for a corrupt file or a shard outside ``directory``; ``FileNotFoundError`` when there
    are no weights."""
    with _read_errors(directory):
        paths, legacy = _weight_files(directory)
        if legacy:
            return _read_bin(paths[0], meta)
        read = _safetensors_headers if meta else _safetensors_data
        state: dict[str, torch.Tensor] = {}
        for path in paths:
            state.update(read(path))
        return state


def stored_float_dtype(directory: Path) -> torch.dtype | None:
    """The floating dtype most of ``directory``'s weights (by element count) are stored in, read from the files'
    headers only (no tensor data); None when it holds no floating tensor. Errors are ``read_weights``'."""
    counts: dict[torch.dtype, int] = {}
    for tensor in read_weights(directory, meta=True).values():
        if tensor.is_floating_point():
            counts[tensor.dtype] = counts.get(tensor.dtype, 0) + tensor.numel()
    return max(counts, key=counts.__getitem__) if counts else None


def each_tensor(directory: Path, names: Mapping[str, str]) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors ``names`` lists (a file's key -> the name to give it), one at a time as ``(name, tensor)``, as
    the files store them (fp16 stays fp16): the caller copies each where it goes and drops it before the next.

    A file is reopened after every ``REOPEN_BYTES`` read: safetensors and a ``.bin`` read with ``mmap=True`` map
    the file, and its pages, once read, stay resident while the mapping lives, so reading a whole file through one
    mapping would hold it all in memory beside the model. A key the files no longer hold is skipped (the caller finds it
    missing); errors are ``read_weights``'."""
    with _read_errors(directory):
        paths, legacy = _weight_files(directory)
        if legacy:
            with open_regular(paths[0]) as handle:       # an old non-zip .bin is read whole: read it once
                budget = REOPEN_BYTES if zipfile.is_zipfile(handle) else None
            yield from _in_turn(paths[0], _bin_tensors, list(names), names, budget)
            return
        owner: dict[str, Path] = {}
        for path in paths:                                  # a key in two shards is the last one's, as read_weights
            with safe_open(str(require_regular(path)), framework="pt") as handle:
                owner.update((key, path) for key in handle.keys() if key in names)
        for path in paths:
            yield from _in_turn(path, _safetensors_tensors, [k for k, p in owner.items() if p == path], names,
                                REOPEN_BYTES)


def _in_turn(path: Path, opener: Callable, keys: list[str], names: Mapping[str, str],
             budget: int | None) -> Iterator[tuple[str, torch.Tensor]]:
    """``keys``' tensors of one file in order, through ``opener(path)`` (a context giving key -> tensor, or
    None when the file has no such key), opened again after each ``budget`` bytes read (never when None)."""
    position = 0
    while position < len(keys):
        with opener(path) as get:
            spent = 0
            while position < len(keys) and (budget is None or spent < budget):
                key = keys[position]
                position += 1
                tensor = get(key)
                if tensor is None:
                    continue
                spent += tensor.numel() * tensor.element_size()
                yield names[key], tensor
                del tensor


@contextmanager
def _safetensors_tensors(path: Path) -> Iterator[Callable[[str], torch.Tensor | None]]:
    with safe_open(str(require_regular(path)), framework="pt") as handle:
        held = set(handle.keys())
        yield lambda key: handle.get_tensor(key) if key in held else None


@contextmanager
def _bin_tensors(path: Path) -> Iterator[Callable[[str], torch.Tensor | None]]:
    """A ``pytorch_model.bin`` mapped (``torch.load(weights_only=True, mmap=True)``: no data read until a tensor
    is used) when it is a zip file, as every ``torch.save`` since torch 1.6 writes; an older one read whole."""
    with open_regular(path) as handle:
        mapped = zipfile.is_zipfile(handle)
        handle.seek(0)
        fd_path = Path(f"/proc/self/fd/{handle.fileno()}")   # the file opened and checked, not its name again
        source = str(fd_path) if mapped and fd_path.exists() else str(require_regular(path)) if mapped else handle
        state = _checked_bin(path, lambda: torch.load(source, map_location="cpu", weights_only=True, mmap=mapped))
    yield state.get
    del state


def _weight_files(directory: Path) -> tuple[list[Path], bool]:
    """The folder's weight files, and whether it is a ``pytorch_model.bin``; ``FileNotFoundError`` if none."""
    single, index, legacy = (directory / "model.safetensors", directory / "model.safetensors.index.json",
                             directory / "pytorch_model.bin")
    if single.exists():
        return [single], False
    if index.exists():
        weight_map = json.loads(read_text(index, MAX_INDEX_BYTES))["weight_map"]
        paths = []
        for shard in sorted(set(weight_map.values())):
            shard_path = directory / shard
            # The shard must sit in this directory; the file itself may be a symlink (the hub cache's are).
            if shard_path.parent.resolve() != directory.resolve():
                raise ValueError(f"shard {shard!r} points outside {directory}")
            paths.append(shard_path)
        return paths, False
    if legacy.exists():
        return [legacy], True
    raise FileNotFoundError(f"{directory}: no model.safetensors, sharded safetensors or pytorch_model.bin")


@contextmanager
def _read_errors(directory: Path) -> Iterator[None]:
    """A damaged file, index or pickle as a ``ValueError`` sentence naming ``directory``."""
    try:
        yield
    except (SafetensorError, json.JSONDecodeError, KeyError, TypeError, AttributeError, RuntimeError,
            EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"{directory}: the weights file is corrupt or unreadable ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    except Exception as exc:  # pickle.UnpicklingError and friends from weights_only=True
        if type(exc).__name__ == "UnpicklingError":
            raise ValueError(f"{directory}: pytorch_model.bin is damaged or holds more than plain tensors; refusing "
                             "to unpickle it (convert it to safetensors)") from None
        raise


def _safetensors_data(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(require_regular(path)))


def _safetensors_headers(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file as a meta tensor of its shape and dtype (the header only)."""
    state: dict[str, torch.Tensor] = {}
    with safe_open(str(require_regular(path)), framework="pt") as handle:
        for name in handle.keys():
            piece = handle.get_slice(name)
            dtype = _SAFETENSORS_DTYPES.get(piece.get_dtype(), torch.float32)
            state[name] = torch.empty(tuple(piece.get_shape()), dtype=dtype, device="meta")
    return state


def _read_bin(path: Path, meta: bool) -> dict[str, torch.Tensor]:
    """A ``pytorch_model.bin`` through ``torch.load(weights_only=True)`` (on ``meta`` when asked)."""
    with open_regular(path) as handle:
        return _checked_bin(path, lambda: torch.load(handle, map_location="meta" if meta else "cpu",
                                                     weights_only=True))


def _checked_bin(path: Path, load: Callable[[], object]) -> dict[str, torch.Tensor]:
    """What ``load()`` unpickled from ``path``, which must be a dict of tensors."""
    try:
        state = load()
    except pickle.UnpicklingError:
        raise
    except Exception as exc:  # a damaged file fails in arbitrary ways (OSError, IndexError, KeyError, ...)
        raise ValueError(f"{path} is corrupt or unreadable ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} does not hold a state dict of tensors")
    return state
