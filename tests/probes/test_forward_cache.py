"""engine/probes/forward_cache.py: the bytes bound, LRU order, the per-visitor limit and the model-object check."""
from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np
import pytest

from engine.probes.forward_cache import ForwardCache, array_bytes

MB = 2**20


class Model:
    """Any object stands for a model: the cache only keeps a weak reference to it."""


def block(megabytes: int) -> np.ndarray:
    return np.zeros(megabytes * MB // 4, dtype=np.float32)


@dataclass
class Result:
    maps: np.ndarray
    tokens: list[str]


def test_array_bytes_counts_the_arrays_inside_dataclasses_dicts_and_lists() -> None:
    value = Result(block(2), ["a", "b"])
    assert 2 * MB <= array_bytes(value) < 2 * MB + 1024
    assert 3 * MB <= array_bytes({"x": [block(1), (block(2),)]}) < 3 * MB + 1024


def test_a_value_is_computed_once_then_read_back() -> None:
    cache, model, calls = ForwardCache(max_bytes=10 * MB), Model(), []
    compute = lambda: calls.append(1) or block(1)                                  # noqa: E731
    first = cache.get_or_compute("v", model, ("attention", "text"), compute)
    again = cache.get_or_compute("v", model, ("attention", "text"), compute)
    assert again is first and len(calls) == 1
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)
    cache.get_or_compute("v", model, ("attention", "other text"), compute)
    assert len(calls) == 2


def test_the_total_stays_under_the_byte_bound_least_recently_used_out_first() -> None:
    cache, model = ForwardCache(max_bytes=5 * MB + 4096, per_visitor=100), Model()   # 5 blocks and their headers
    for name in "abcd":
        cache.put("v", model, name, block(1))
    cache.get("v", model, "a")                                           # a is now the most recently used
    cache.put("v", model, "e", block(2))                                 # 4 + 2 > 5: b goes, the oldest unused
    assert cache.nbytes <= 5 * MB + 4096
    assert cache.get("v", model, "b") is None
    assert all(cache.get("v", model, k) is not None for k in "acde")


def test_an_entry_larger_than_the_bound_is_never_kept() -> None:
    cache, model = ForwardCache(max_bytes=2 * MB), Model()
    cache.put("v", model, "small", block(1))
    assert cache.put("v", model, "huge", block(3)) is False
    assert cache.get("v", model, "huge") is None and cache.get("v", model, "small") is not None
    assert cache.get_or_compute("v", model, "huge", lambda: block(3)).nbytes == 3 * MB   # answered, not kept
    assert len(cache) == 1 and ForwardCache(max_bytes=0).put("v", model, "x", block(1)) is False


def test_one_visitor_keeps_at_most_per_visitor_entries_and_cannot_push_out_others() -> None:
    cache, model = ForwardCache(max_bytes=100 * MB, per_visitor=2), Model()
    cache.put("other", model, "kept", block(1))
    for name in "abc":
        cache.put("busy", model, name, block(1))
    assert cache.get("busy", model, "a") is None                         # its own oldest went
    assert cache.get("busy", model, "b") is not None and cache.get("busy", model, "c") is not None
    assert cache.get("other", model, "kept") is not None
    assert cache.get("other", model, "b") is None                        # visitors never see each other's


def test_a_new_model_object_misses_and_a_gone_one_frees_its_entries() -> None:
    cache, old = ForwardCache(max_bytes=10 * MB), Model()
    cache.put("v", old, "text", block(1))
    new = Model()                                                        # a reloaded model, a new live snapshot
    assert cache.get("v", new, "text") is None and cache.get("v", old, "text") is not None
    del old
    gc.collect()
    cache.put("v", new, "other", block(1))                               # a put sweeps the gone model's entries
    assert len(cache) == 1 and cache.nbytes == array_bytes(block(1))
    assert cache.stats.invalidated == 1


def test_a_reused_id_is_not_taken_for_the_old_model() -> None:
    """The key holds ``id(model)``; a new object may get a freed id. The weak reference tells them apart."""
    cache = ForwardCache(max_bytes=10 * MB)
    model = Model()
    cache.put("v", model, "text", block(1))
    slot = next(iter(cache._entries))
    entry = cache._entries[slot]
    other = Model()
    cache._entries[("v", id(other), "text")] = entry                     # as if `other` had model's old id
    assert cache.get("v", other, "text") is None


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        ForwardCache(max_bytes=-1)
    with pytest.raises(ValueError):
        ForwardCache(per_visitor=0)


def test_forgetting_a_visitor_frees_its_entries_and_keeps_everyone_elses() -> None:
    """A page that closed (``explorer.serving.sessions``): its entries and their bytes go, another visitor's stay."""
    cache, model = ForwardCache(max_bytes=10 * MB), Model()
    for key in ("a", "b"):
        cache.put("closed", model, key, block(1))
    cache.put("open", model, "a", block(2))
    assert cache.forget("closed") == 2 and cache.forget("nobody") == 0
    assert cache.get("closed", model, "a") is None and cache.get("open", model, "a") is not None
    assert 2 * MB <= cache.nbytes < 3 * MB and len(cache) == 1
