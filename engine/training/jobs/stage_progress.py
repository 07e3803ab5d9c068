"""What a job's preparation says while it works: each stage's message, and while the corpus is read, how much
of it has been read and an ETA.

``prepare_job`` names its stages (counting the documents, training the vocabulary, tokenising, planning, building
the model) through ``StageProgress.stage``; the corpus passes report ``(characters read, total)`` at least every
``engine.data.token_cache.REPORT_EVERY_DOCUMENTS`` documents, and ``StageProgress.reading`` turns each report into
the stage's message with a count and an ETA: ``tokenising shakespeare: 0.6 of 1.4 MB · ETA 2s`` (``all 1.4 MB
read · finishing`` once read: the vocabulary's merges, the store's last write). The ETA is the
stage's own pace so far (characters per second since the stage began, on ``clock``); with no total (a dataset, or
files read only up to ``--max-documents`` before they were counted) it says the size is not known yet.
"""
from __future__ import annotations

import time
from typing import Any, Callable

Clock = Callable[[], float]


def seconds_words(seconds: float) -> str:
    """``3723`` -> "1h 02m 03s", ``65`` -> "1m 05s", ``0.4`` -> "0s"."""
    whole = int(round(max(0.0, seconds)))
    minutes, s = divmod(whole, 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h {m:02d}m {s:02d}s" if hours else (f"{m}m {s:02d}s" if m else f"{s}s")


def megabytes(characters: int) -> str:
    """Characters as MB: one decimal under 10 MB ("0.4"), whole ones past it ("1,234")."""
    mb = characters / 1e6
    return f"{mb:.1f}" if mb < 10 else f"{mb:,.0f}"


class StageProgress:
    """The messages of one job's preparation, handed to ``say`` (which answers False to cancel)."""

    def __init__(self, say: Callable[[str], Any], clock: Clock = time.monotonic) -> None:
        self.say, self.clock = say, clock
        self.current = "reading the corpus"
        self.since = clock()

    def stage(self, message: str) -> Any:
        """A new stage begins: say so; its reading reports count from now."""
        self.current, self.since = message, self.clock()
        return self.say(message)

    def reading(self, done: int, total: int | None) -> Any:
        """The current stage has read ``done`` of ``total`` characters: say how much, and how long is left."""
        return self.say(self.reading_message(done, total))

    def reading_message(self, done: int, total: int | None) -> str:
        """``<stage>: 0.6 of 1.4 MB · ETA 2s`` (``ETA —`` before any pace is known; no total: the MB read so far;
        all read: ``finishing``)."""
        if total is None:
            return f"{self.current}: {megabytes(done)} MB read · ETA unknown (the size is not known before reading)"
        if done >= total:
            return f"{self.current}: all {megabytes(done)} MB read · finishing"
        spent = self.clock() - self.since
        eta = seconds_words((total - done) * spent / done) if done > 0 and spent > 0 else "—"
        return f"{self.current}: {megabytes(done)} of {megabytes(max(total, done))} MB · ETA {eta}"
