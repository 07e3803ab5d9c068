"""One model forward per input, kept: a least-recently-used store bounded in bytes and per visitor.

A probe's result for ``(kind, text, pair, length)`` on one model is computed once and read back when only
what is drawn changes (a layer, a head, a statistic). :class:`ForwardCache` holds those results:

* **bounded in bytes**: each entry's size is the bytes of the numpy arrays it holds (:func:`array_bytes`);
  the least recently used entries go first once the total would pass ``max_bytes``, and an entry larger
  than ``max_bytes`` on its own is returned but never kept;
* **per visitor**: one visitor (a Gradio session, any string) keeps at most ``per_visitor`` entries, its
  own least recently used going first, so one visitor cannot push out everyone else's;
* **per model object**: an entry remembers its model through a weak reference, and it answers only for that
  very object. A reloaded checkpoint or a new ``live`` snapshot is a new object, so its inputs miss and the old
  entries are dropped; the cache never keeps a model alive.

Plain data only (no Gradio, no settings: the explorer passes the bound in). Thread-safe; the computation runs
outside the lock, so two requests for the same new input may both compute it (the second one kept wins).
"""
from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

DEFAULT_MAX_BYTES = 512 * 2**20
DEFAULT_PER_VISITOR = 6
T = TypeVar("T")


def array_bytes(value: Any, _depth: int = 0) -> int:
    """The bytes of the numpy arrays in ``value`` (dataclasses, dicts, lists and tuples walked), plus 64 per
    other leaf: what an entry costs, to a few percent."""
    if _depth > 8:
        return 64
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 112
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(array_bytes(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value)) + 64
    if isinstance(value, dict):
        return sum(array_bytes(v, _depth + 1) for v in value.values()) + 64
    if isinstance(value, (list, tuple)):
        return sum(array_bytes(v, _depth + 1) for v in value) + 56
    if isinstance(value, str):
        return 49 + len(value)
    return 64


@dataclass
class _Entry:
    value: Any
    nbytes: int
    visitor: str
    model: weakref.ref


@dataclass
class CacheStats:
    """Counts since the cache was made: lookups answered, computed, and entries evicted or invalidated."""

    hits: int = 0
    misses: int = 0
    evicted: int = 0
    invalidated: int = 0


class ForwardCache:
    """Results of model forwards by ``(visitor, model object, key)``, least recently used first out."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, per_visitor: int = DEFAULT_PER_VISITOR) -> None:
        if max_bytes < 0 or per_visitor < 1:
            raise ValueError(f"max_bytes must be >= 0 and per_visitor >= 1, got {max_bytes} and {per_visitor}")
        self.max_bytes = int(max_bytes)
        self.per_visitor = int(per_visitor)
        self.stats = CacheStats()
        self._entries: OrderedDict[tuple[str, int, Hashable], _Entry] = OrderedDict()   # oldest first
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Bytes held now (never more than ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, visitor: str, model: object, key: Hashable) -> Any | None:
        """The value kept for ``key`` on this very ``model`` object for ``visitor``, else None."""
        slot = (visitor, id(model), key)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and entry.model() is not model:
                self._drop(slot)                    # the id of a model that is gone, reused by a new object
                self.stats.invalidated += 1
                entry = None
            if entry is None:
                return None
            self._entries.move_to_end(slot)
            return entry.value

    def put(self, visitor: str, model: object, key: Hashable, value: Any, nbytes: int | None = None) -> bool:
        """Keep ``value``; False when it alone is larger than ``max_bytes`` (then nothing changes)."""
        size = array_bytes(value) if nbytes is None else int(nbytes)
        if size > self.max_bytes:
            return False
        slot = (visitor, id(model), key)
        with self._lock:
            self._sweep()
            if slot in self._entries:
                self._drop(slot)
            mine = [s for s, e in self._entries.items() if e.visitor == visitor]      # oldest first
            for old in mine[:max(0, len(mine) - self.per_visitor + 1)]:
                self._drop(old)
                self.stats.evicted += 1
            while self._entries and self._bytes + size > self.max_bytes:
                self._drop(next(iter(self._entries)))
                self.stats.evicted += 1
            self._entries[slot] = _Entry(value, size, visitor, weakref.ref(model))
            self._bytes += size
        return True

    def get_or_compute(self, visitor: str, model: object, key: Hashable, compute: Callable[[], T]) -> T:
        """The kept value, or ``compute()`` kept and returned (its exceptions pass through, nothing kept)."""
        found = self.get(visitor, model, key)
        if found is not None:
            with self._lock:
                self.stats.hits += 1
            return found
        with self._lock:
            self.stats.misses += 1
        value = compute()
        self.put(visitor, model, key, value)
        return value

    def forget(self, visitor: str) -> int:
        """Drop every entry of ``visitor`` (its page closed); how many went."""
        with self._lock:
            mine = [s for s, e in self._entries.items() if e.visitor == visitor]
            for slot in mine:
                self._drop(slot)
        return len(mine)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _sweep(self) -> None:
        """Drop the entries whose model is gone (lock held)."""
        for slot in [s for s, e in self._entries.items() if e.model() is None]:
            self._drop(slot)
            self.stats.invalidated += 1

    def _drop(self, slot: tuple[str, int, Hashable]) -> None:
        entry = self._entries.pop(slot)
        self._bytes -= entry.nbytes
