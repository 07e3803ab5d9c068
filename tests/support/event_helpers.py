"""Checks on how a built app wires its events (read from the Blocks config, no browser)."""
from __future__ import annotations

from typing import Any

import gradio as gr


def failure_clears(demo: gr.Blocks, api_name: str, outputs: list[Any]) -> bool:
    """True when the event ``api_name`` has a ``.failure`` follow-up (``explorer.endpoints.clear_on_failure``)
    that writes an empty value to exactly ``outputs``, so an old result never stays under a new error."""
    deps = demo.get_config_file()["dependencies"]
    event = next(d for d in deps if d.get("api_name") == api_name)
    ids = [o._id for o in outputs]
    for dep in deps:
        if dep.get("trigger_after") == event["id"] and dep.get("trigger_only_on_failure") and dep["outputs"] == ids:
            values = demo.fns[dep["id"]].fn()
            return all(v is None for v in (values if isinstance(values, tuple) else (values,)))
    return False
