"""Where the probing tabs' models run and how large a hub download may be: two settings read from the
environment (``EXPLORER_DEVICE``, ``EXPLORER_MAX_HUB_MB``) and handed to the ``ModelRegistry``."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping

from engine.checkpoints import hub
from engine.training.loop.config import auto_device


def inference_device(environ: Mapping[str, str] | None = None) -> str:
    """Where the probing tabs' models run: ``$EXPLORER_DEVICE`` (``cpu``, ``cuda``, ``cuda:N``) or, by
    default, CUDA when torch sees a GPU (also on a ZeroGPU Space, where ``spaces`` defers the move until a
    ``spaces.GPU`` call holds the device) and the CPU otherwise."""
    env = os.environ if environ is None else environ
    chosen = env.get("EXPLORER_DEVICE", "").strip().lower() or "auto"
    if chosen == "auto":
        return auto_device()
    if chosen == "cpu" or re.fullmatch(r"cuda(:\d+)?", chosen):
        return chosen
    raise ValueError(f"EXPLORER_DEVICE={chosen!r}: expected auto, cpu, cuda or cuda:N")


def max_hub_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The largest hub download the app allows: ``$EXPLORER_MAX_HUB_MB`` (default 1,500 MB, room for
    bert-large in fp32), so a stranger cannot make a public app fetch a multi-GB repository."""
    env = os.environ if environ is None else environ
    raw = env.get("EXPLORER_MAX_HUB_MB", "").strip()
    try:
        megabytes = float(raw) if raw else hub.DEFAULT_MAX_BYTES / 1e6
    except ValueError:
        megabytes = hub.DEFAULT_MAX_BYTES / 1e6
    return int(max(megabytes, 0.0) * 1_000_000)
