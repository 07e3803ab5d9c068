"""The session's clock, its stages and its log: every stage runs before a deadline, a failing stage is recorded
and the next one runs, and ``summary.json`` is rewritten after every stage so a killed session still says how
far it got."""
from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
LOG_FILE, SUMMARY_FILE = "session.log", "summary.json"


@dataclass
class StageResult:
    """How a stage ended: ``status`` passed / failed / skipped, one line for a person, and its numbers."""

    status: str
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


class Session:
    """The budget (``budget_s`` from ``started``, a ``time.monotonic()`` value taken when the process began),
    the log (stdout and ``out/session.log``) and the summary (``out/summary.json``)."""

    def __init__(self, out: Path, budget_s: float, started: float, settings: dict[str, Any] | None = None) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.started, self.budget_s = started, float(budget_s)
        self.deadline = started + float(budget_s)
        self.summary: dict[str, Any] = {"budget_s": self.budget_s, "settings": settings or {}, "stages": {}}
        self._log = (out / LOG_FILE).open("a", encoding="utf-8")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def log(self, message: str) -> None:
        """One line, stamped with the seconds since the session began, to stdout and the log file."""
        line = f"[{self.elapsed():6.1f}s] {message}"
        print(line, flush=True)
        self._log.write(line + "\n")
        self._log.flush()

    def stage(self, name: str, run: Callable[[float], StageResult], limit_s: float, reserve_s: float = 0.0,
              ) -> StageResult:
        """Run ``run(deadline)`` with ``deadline = min(now + limit_s, session deadline - reserve_s)``; a stage
        with no time left is skipped, one that raises is failed (its trace in the log); recorded either way."""
        now = time.monotonic()
        deadline = min(now + limit_s, self.deadline - reserve_s)
        self.log(f"== {name}: up to {max(0.0, deadline - now):.0f} s")
        if deadline <= now:
            result = StageResult(SKIPPED, "out of time")
        else:
            try:
                result = run(deadline)
            except Exception as exc:   # a stage's failure must not end the session
                self._log.write(traceback.format_exc())
                result = StageResult(FAILED, f"{type(exc).__name__}: {exc}")
        result.seconds = round(time.monotonic() - now, 2)
        self.log(f"== {name}: {result.status} in {result.seconds:.1f} s" + (f": {result.detail}" if result.detail else ""))
        self.summary["stages"][name] = asdict(result)
        self.write_summary()
        return result

    def write_summary(self) -> None:
        """``summary.json``, replaced atomically."""
        self.summary["elapsed_s"] = round(self.elapsed(), 2)
        temporary = self.out / f".{SUMMARY_FILE}.{os.getpid()}"
        temporary.write_text(json.dumps(self.summary, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(temporary, self.out / SUMMARY_FILE)

    def close(self) -> None:
        self.write_summary()
        self._log.close()
