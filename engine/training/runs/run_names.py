"""What a new run folder is called: ``<task>-<yyyymmdd-hhmmss>`` (``classification-20260101-120000``).

Runs written before this was their name (``20260101-120000``, ``run-…``, ``finetune-<task>-…``) keep theirs:
a name is only a folder's name, and nothing reads the task or the time from it.
"""
from __future__ import annotations

import time

TIME_FORMAT = "%Y%m%d-%H%M%S"


def run_name(task: str, when: float | None = None) -> str:
    """``<task>-<yyyymmdd-hhmmss>`` at ``when`` (``time.time()``; now when None), in local time."""
    return f"{task}-{time.strftime(TIME_FORMAT, time.localtime(when))}"
