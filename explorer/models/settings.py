"""Where the probing tabs' models run, how large a hub download and how large a model may be: three settings
read from the environment (``EXPLORER_DEVICE``, ``EXPLORER_MAX_HUB_MB``, ``EXPLORER_MAX_MODEL_PARAMS``) and
handed to the ``ModelRegistry``; and how many heavy requests run at once (``EXPLORER_HEAVY_CONCURRENCY``),
handed to the heavy endpoints' queue (``explorer/endpoints.py``)."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping

from engine.checkpoints import hub
from engine.checkpoints.model_fit import DEFAULT_MAX_PARAMETERS
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


def env_amount(env: Mapping[str, str], name: str, default: float) -> float:
    """A size setting from ``env`` (``2e9``, ``512``, ``2,000``): a number of 0 or more; unset, unreadable,
    NaN or infinite keeps ``default`` (a size cap must never become no cap)."""
    raw = env.get(name, "").strip().replace(",", "").replace("_", "")
    try:
        value = float(raw) if raw else float(default)
    except ValueError:
        value = float(default)
    if value != value or value in (float("inf"), float("-inf")):
        value = float(default)
    return max(value, 0.0)


def max_model_parameters(environ: Mapping[str, str] | None = None) -> int:
    """The largest model the app loads, in parameters: ``$EXPLORER_MAX_MODEL_PARAMS`` (``2e9`` or
    ``2000000000``; default 2 billion). A folder or hub model whose config.json implies more is refused
    before anything is allocated; an unreadable value keeps the default."""
    env = os.environ if environ is None else environ
    return int(env_amount(env, "EXPLORER_MAX_MODEL_PARAMS", DEFAULT_MAX_PARAMETERS))


DEFAULT_HEAVY_CONCURRENCY = 1


def heavy_concurrency(environ: Mapping[str, str] | None = None) -> int:
    """How many heavy requests (attribution, the neighbours index, comparisons, over-training views, head
    ablation) run at once, all heavy endpoints together: ``$EXPLORER_HEAVY_CONCURRENCY`` (default 1; an
    unreadable or smaller value keeps 1). They wait in their own queue group, so light endpoints keep answering."""
    env = os.environ if environ is None else environ
    raw = env.get("EXPLORER_HEAVY_CONCURRENCY", "").strip()
    try:
        return max(1, int(raw)) if raw else DEFAULT_HEAVY_CONCURRENCY
    except ValueError:
        return DEFAULT_HEAVY_CONCURRENCY
