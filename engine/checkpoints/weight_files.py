"""The weight files of a Hugging Face folder: ``model.safetensors``, sharded safetensors or a weights-only
``pytorch_model.bin``, read whole or, with ``meta=True``, as names, shapes and dtypes only.

The header-only read lets ``hf_format.load_directory`` check a folder against its ``config.json`` before it
spends memory (``engine.checkpoints.model_fit``): safetensors headers give every tensor's name, shape and
dtype without reading its data (``safe_open`` also checks that the header's offsets fit the file), and a
``.bin`` is read with ``torch.load(weights_only=True, map_location="meta")``. Nothing is ever unpickled
beyond plain tensors.
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from engine.regular_files import open_regular, read_text, require_regular

MAX_INDEX_BYTES = 64 << 20
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
    single, index, legacy = (directory / "model.safetensors", directory / "model.safetensors.index.json",
                             directory / "pytorch_model.bin")
    read = _safetensors_headers if meta else _safetensors_data
    try:
        if single.exists():
            return read(single)
        if index.exists():
            weight_map = json.loads(read_text(index, MAX_INDEX_BYTES))["weight_map"]
            state: dict[str, torch.Tensor] = {}
            for shard in sorted(set(weight_map.values())):
                shard_path = directory / shard
                # The shard must sit in this directory; the file itself may be a symlink (the hub cache's are).
                if shard_path.parent.resolve() != directory.resolve():
                    raise ValueError(f"shard {shard!r} points outside {directory}")
                state.update(read(shard_path))
            return state
        if legacy.exists():
            return _read_bin(legacy, meta)
    except (SafetensorError, json.JSONDecodeError, KeyError, TypeError, AttributeError, RuntimeError,
            EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"{directory}: the weights file is corrupt or unreadable ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    except Exception as exc:  # pickle.UnpicklingError and friends from weights_only=True
        if type(exc).__name__ == "UnpicklingError":
            raise ValueError(f"{directory}: pytorch_model.bin is damaged or holds more than plain tensors; refusing "
                             "to unpickle it (convert it to safetensors)") from None
        raise
    raise FileNotFoundError(f"{directory}: no model.safetensors, sharded safetensors or pytorch_model.bin")


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
    try:
        with open_regular(path) as handle:
            state = torch.load(handle, map_location="meta" if meta else "cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise
    except Exception as exc:  # a damaged file fails in arbitrary ways (OSError, IndexError, KeyError, ...)
        raise ValueError(f"{path} is corrupt or unreadable ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} does not hold a state dict of tensors")
    return state
