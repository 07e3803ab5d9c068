"""Following a run's ``metrics.jsonl`` while another process writes it: only the new bytes, in bounded memory.

A command-line job (``python -m engine.pretrain`` / ``engine.finetune``, or torchrun's rank 0) appends one JSON
line per logged event and flushes it (``state.append_metrics``); a reader in another process (the Training tab
watching a run, maybe on a shared cluster folder) sees the file grow, sometimes in the middle of a line.

``MetricsTail.read(history)`` reads from where it stopped to the end of the file, in chunks of ``CHUNK_BYTES``:

- each complete line is parsed with ``MetricsLine.parse``; a bad line is skipped and counted (``skipped``, and
  ``first_problem`` names its line number and what is wrong);
- a torn last line (no newline yet) waits until the rest of it arrives; a line longer than ``MAX_LINE_BYTES`` is
  dropped and counted as damaged, so one runaway line cannot fill memory;
- when the file was replaced or shrank (a resumed run rewrites it atomically without the records past its
  checkpoint: ``state.truncate_metrics``), it empties ``history`` and reads again from the top.

``MetricsHistory`` keeps at most ``max_records`` records: past that it keeps every other record of its most
numerous kind, and from then on every ``stride``-th new one of that kind, so a long run's curves stay evenly
sampled; the newest record of each kind is always kept aside (``latest``). Nothing here raises on the file's
content or on an I/O error (``TailRead.problem`` says what went wrong).

**Where a run was continued.** ``metrics.jsonl`` holds no record of a resume (``loop.resume.resume`` only drops the
records past its checkpoint), and a continue that changes nothing about the schedule changes nothing on the
curves. What a person sees is the learning rate jumping when a continue changed the run's total steps (the one
schedule setting ``RESUMABLE_FIELDS`` lets change): both schedules only rise during warmup and only fall after
it, so a learning rate that **rises again after it has fallen** was re-planned by a continue (``LrJumps``: the
jump is between the last logged step before the rise and the first after it; the run continued from a
checkpoint between the two, at the first when every step is logged). After a jump the next one is looked for
only once the rate has fallen again (a larger total can also lengthen a warmup given as a ratio). A continue
that lowers the rate (a smaller total) or does not move it is not found: on a falling curve it is no jump.
``MetricsHistory`` finds them as it reads, before any thinning, at most ``MAX_JUMPS`` (the newest kept).
"""
from __future__ import annotations

import math
import os
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import regular_files
from engine.training.runs.records import MetricsLine

CHUNK_BYTES = 1 << 20          # read at most this much at a time
MAX_LINE_BYTES = 1 << 20       # a line longer than this is damaged (a real record is a few hundred bytes)
MAX_RECORDS = 10_000           # what a history keeps (10x the points a curve is drawn with)
MAX_JUMPS = 100                # learning-rate jumps a history keeps (the newest)


@dataclass(frozen=True)
class LrJump:
    """The learning rate rising again after it fell: where a run was continued with a re-planned schedule."""

    step: int                      # the last logged step before the rise (where the continue is marked)
    next_step: int                 # the first logged step after it
    lr_before: float               # the learning rate logged at ``step``
    lr_after: float                # ... and at ``next_step``


@dataclass
class LrJumps:
    """Finds ``LrJump`` s in train records offered in step order (module docstring)."""

    last: tuple[int, float] | None = None      # (step, lr) of the previous train record with a learning rate
    fallen: bool = False                       # the rate fell since the start or the last jump

    def feed(self, record: dict[str, Any]) -> LrJump | None:
        """Look at one record; the jump it ends, if any (records without a numeric ``lr`` are passed over)."""
        lr, step = record.get("lr"), record.get("step")
        if record.get("kind") != "train" or not isinstance(step, int) or isinstance(lr, bool) \
                or not isinstance(lr, (int, float)) or not math.isfinite(lr):
            return None
        last, self.last = self.last, (step, float(lr))
        if last is None or step <= last[0]:
            return None
        if lr < last[1]:
            self.fallen = True
        elif lr > last[1] and self.fallen:
            self.fallen = False
            return LrJump(last[0], step, last[1], float(lr))
        return None


@dataclass
class MetricsHistory:
    """The records read so far, at most ``max_records`` of them, evenly thinned per kind past that."""

    max_records: int = MAX_RECORDS
    records: list[dict[str, Any]] = field(default_factory=list)
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)   # kind -> its newest record, always kept
    added: int = 0                  # records offered since the last clear (kept or not)
    clears: int = 0                 # times the history was emptied (the file was rewritten)
    jumps: deque[LrJump] = field(default_factory=lambda: deque(maxlen=MAX_JUMPS))   # where it was continued
    _finder: LrJumps = field(default_factory=LrJumps, init=False, repr=False)
    _ordinals: list[int] = field(default_factory=list, init=False, repr=False)   # kept records' numbers in kind
    _seen: Counter = field(default_factory=Counter, init=False, repr=False)     # offered per kind since clear
    _stride: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_records < 2:
            raise ValueError(f"max_records must be at least 2, got {self.max_records}")

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever what the history holds may have changed: (clears, added)."""
        return (self.clears, self.added)

    def seen(self, kind: str) -> int:
        """How many records of ``kind`` were offered since the last clear (kept or not)."""
        return self._seen[kind]

    def stride(self, kind: str) -> int:
        """Every how many records of ``kind`` one is kept now (1 until the history was first thinned)."""
        return self._stride.get(kind, 1)

    def add(self, record: dict[str, Any]) -> None:
        """Offer one parsed record; kept when its number within its kind is a multiple of that kind's stride."""
        kind = str(record.get("kind", ""))
        number = self._seen[kind]
        self._seen[kind] += 1
        self.added += 1
        self.latest[kind] = record
        jump = self._finder.feed(record)
        if jump is not None:
            self.jumps.append(jump)
        if number % self.stride(kind):
            return
        self.records.append(record)
        self._ordinals.append(number)
        while len(self.records) > self.max_records:
            self._thin()

    def shown(self) -> list[dict[str, Any]]:
        """The kept records, then the newest record of each kind that thinning left out (the curves' last point)."""
        return self.records + [r for kind, r in self.latest.items() if self._last_kept(kind) != self._seen[kind] - 1]

    def clear(self) -> None:
        """Forget everything read (the file was replaced or shrank)."""
        self.records, self._ordinals, self.latest = [], [], {}
        self._seen, self._stride = Counter(), {}
        self.jumps, self._finder = deque(maxlen=MAX_JUMPS), LrJumps()
        self.added = 0
        self.clears += 1

    def _last_kept(self, kind: str) -> int | None:
        return next((n for r, n in zip(reversed(self.records), reversed(self._ordinals))
                     if str(r.get("kind", "")) == kind), None)

    def _thin(self) -> None:
        kind = Counter(str(r.get("kind", "")) for r in self.records).most_common(1)[0][0]
        stride = self._stride[kind] = self.stride(kind) * 2
        kept = [(r, n) for r, n in zip(self.records, self._ordinals)
                if str(r.get("kind", "")) != kind or n % stride == 0]
        self.records = [r for r, _ in kept]
        self._ordinals = [n for _, n in kept]


@dataclass(frozen=True)
class TailRead:
    """What one ``MetricsTail.read`` did."""

    records: int = 0                # good records read this time
    skipped: int = 0                # damaged lines skipped this time
    restarted: bool = False         # the file was replaced or shrank: the history was emptied and read again
    problem: str | None = None      # why the file cannot be read now ("metrics.jsonl cannot be read (...)")


class MetricsTail:
    """Reads a growing ``metrics.jsonl`` a piece at a time: each ``read`` parses only what was appended since."""

    def __init__(self, path: str | Path, chunk_bytes: int = CHUNK_BYTES, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = Path(path)
        self.chunk_bytes, self.max_line_bytes = chunk_bytes, max_line_bytes
        self.offset = 0                      # bytes of the file consumed (complete lines and the pending piece)
        self.lines = 0                       # complete lines read
        self.skipped = 0                     # damaged lines skipped, over all reads since the last restart
        self.first_problem: str | None = None   # "line 4: it is not valid JSON"
        self.modified: float | None = None   # the file's mtime when last read (None: no file yet)
        self._identity: tuple[int, int] | None = None
        self._pending = bytearray()          # the start of a line whose end has not arrived
        self._dropping = False               # inside a line over max_line_bytes: skip to its newline

    @property
    def pending_bytes(self) -> int:
        """Bytes of a torn last line waiting for the rest of it."""
        return len(self._pending)

    def read(self, history: MetricsHistory) -> TailRead:
        """Add to ``history`` every good record appended since the last read (after emptying it when the file
        was replaced or shrank); never raises."""
        try:
            with regular_files.open_regular(self.path) as handle:      # a pipe or /dev/zero: refused, never read
                info = os.fstat(handle.fileno())
                restarted = self._restart_if_rewritten(info, history)
                self.modified = info.st_mtime
                handle.seek(self.offset)
                before = (history.added, self.skipped)
                while chunk := handle.read(self.chunk_bytes):
                    self.offset += len(chunk)
                    self._feed(chunk, history)
        except FileNotFoundError:
            restarted = self._identity is not None
            if restarted:                    # the file went away: what was read no longer describes the run
                self._reset(history)
            self.modified = None
            return TailRead(restarted=restarted)
        except (OSError, ValueError) as exc:    # unreadable, or not a regular file
            return TailRead(problem=f"{self.path.name} cannot be read ({regular_files.reason(exc)})")
        return TailRead(history.added - before[0], self.skipped - before[1], restarted)

    def _restart_if_rewritten(self, info: os.stat_result, history: MetricsHistory) -> bool:
        identity = (info.st_dev, info.st_ino)
        rewritten = self._identity is not None and (identity != self._identity or info.st_size < self.offset)
        if rewritten:
            self._reset(history)
        self._identity = identity
        return rewritten

    def _reset(self, history: MetricsHistory) -> None:
        self.offset = self.lines = self.skipped = 0
        self.first_problem, self._identity = None, None
        self._pending.clear()
        self._dropping = False
        history.clear()

    def _feed(self, chunk: bytes, history: MetricsHistory) -> None:
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            if self._dropping:               # the end of an over-long line, counted when it began
                self._dropping = False
                self.lines += 1
                continue
            self._pending += piece
            self._line(bytes(self._pending), history)
            self._pending.clear()
        if self._dropping:
            return
        self._pending += rest
        if len(self._pending) > self.max_line_bytes:
            self._pending.clear()
            self._dropping = True
            self._damaged(self.lines + 1, f"it is longer than {self.max_line_bytes:,} bytes")

    def _line(self, line: bytes, history: MetricsHistory) -> None:
        self.lines += 1
        if not line.strip():
            return
        parsed = MetricsLine.parse(line)
        if isinstance(parsed, MetricsLine):
            history.add(parsed.record)
        else:
            self._damaged(self.lines, parsed.reason)

    def _damaged(self, number: int, reason: str) -> None:
        self.skipped += 1
        self.first_problem = self.first_problem or f"line {number}: {reason}"
