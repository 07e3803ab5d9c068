"""Training throughput smoothed over a window, so the tokens/s a user reads does not jump step to step.

One step's ``tokens_per_s`` swings with the batch (short or long sequences) and with whatever else the
machine does; ``Throughput`` reports tokens divided by training time over the last ``window_s`` seconds
of training (the trainer's ``elapsed``, which excludes pauses and waits), at least the last record.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Mapping

WINDOW_S = 10.0          # seconds of training time the shown tokens/s averages over


class Throughput:
    """Tokens per second over the last ``window_s`` seconds of training, fed the trainer's train records."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, float, float]] = deque()   # (elapsed at end, seconds, tokens)
        self._last_elapsed: float | None = None

    def add(self, record: Mapping[str, Any]) -> None:
        """Take one train record (``tokens_per_s`` of its step and the run's cumulative ``elapsed``).

        The seconds since the previous record are the step's duration when every step is logged; with
        ``log_every`` > 1 the record's rate stands for the steps between (an estimate)."""
        rate, elapsed = record.get("tokens_per_s"), record.get("elapsed")
        if rate is None or elapsed is None or not rate > 0:
            return
        elapsed = float(elapsed)
        seconds = elapsed - self._last_elapsed if self._last_elapsed is not None else 0.0
        if seconds <= 0:                     # the first record (or a restart): one step of unknown length
            seconds = 1.0 / float(rate)      # weight it as one second's worth of tokens at its rate
        self._last_elapsed = elapsed
        self._points.append((elapsed, seconds, float(rate) * seconds))
        while len(self._points) > 1 and self._points[0][0] <= elapsed - self.window_s:
            self._points.popleft()

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens over seconds in the window; None before the first record."""
        if not self._points:
            return None
        seconds = sum(p[1] for p in self._points)
        return sum(p[2] for p in self._points) / seconds if seconds > 0 else None
