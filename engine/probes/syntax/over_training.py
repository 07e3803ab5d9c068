"""The syntax measures over a run's checkpoints: the best head per relation and the UPOS probe by layer, one
point per checkpoint, oldest first, each point cached in memory.

A point is computed from one forward over the sentences (``features``), then ``heads`` and ``layer_probe``.
**The cache** (:class:`PointCache`, least recently used out) is keyed on the checkpoint's folder, the newest
modification time of the files in it (a checkpoint written again under the same name is a new key), the
sentences' fingerprint and the settings; nothing is written next to the checkpoints (a run's folder is the
trainer's). A model held only in memory (the live run) has no folder and is never cached.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import DependencySentence, fingerprint
from engine.probes.syntax.features import sentence_features
from engine.probes.syntax.heads import DIRECTIONS, HeadScores, head_scores
from engine.probes.syntax.layer_probe import LayerProbeResult, layer_probe

CACHE_ENTRIES = 64


@dataclass
class SyntaxPoint:
    """One model's syntax measures: every head's scores and the layer probe."""

    heads: HeadScores
    probe: LayerProbeResult


@dataclass(frozen=True)
class CheckpointRef:
    """A checkpoint to measure: its label and step, its folder (None: not cacheable) and how to load it."""

    label: str
    step: int | None
    folder: Path | None
    load: Callable[[], LoadedModel]


@dataclass
class SyntaxOverTraining:
    """The measures at each checkpoint, oldest first."""

    labels: list[str]
    steps: list[int | None]
    relations: list[str]                  # R (the data's: the same at every checkpoint)
    best_accuracy: np.ndarray             # (C, R) the best head's accuracy, over both directions
    best_head: list[list[str]]            # (C, R) "layer-head" of that head (layers from 1, heads from 0)
    baseline: np.ndarray                  # (R,) the best fixed offset's accuracy, over both directions
    probe_accuracy: np.ndarray            # (C, L + 1)
    selectivity: np.ndarray               # (C, L + 1)
    cached: list[bool]                    # whether each point came from the cache

    def to_pipeline(self) -> dict[str, Any]:
        """Plain JSON: one row per checkpoint with the best head per relation and the probe by layer."""
        points = []
        for c, label in enumerate(self.labels):
            points.append({"label": label, "step": self.steps[c], "cached": self.cached[c],
                           "best_heads": [{"relation": r, "head": self.best_head[c][i],
                                           "accuracy": float(self.best_accuracy[c, i])}
                                          for i, r in enumerate(self.relations)],
                           "probe_accuracy": self.probe_accuracy[c].tolist(),
                           "selectivity": self.selectivity[c].tolist()})
        return {"relations": list(self.relations), "baseline": self.baseline.tolist(), "points": points,
                "layer_numbering": "heads as layer-head, layers of attention from 1; probe layers from 0"}


class PointCache:
    """:class:`SyntaxPoint` by key, the least recently used dropped past ``entries``; thread-safe."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = max(1, int(entries))
        self._points: OrderedDict[Hashable, SyntaxPoint] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._points)

    def get(self, key: Hashable) -> SyntaxPoint | None:
        with self._lock:
            point = self._points.get(key)
            if point is not None:
                self._points.move_to_end(key)
            return point

    def put(self, key: Hashable, point: SyntaxPoint) -> None:
        with self._lock:
            self._points[key] = point
            self._points.move_to_end(key)
            while len(self._points) > self.entries:
                self._points.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._points.clear()


POINTS = PointCache()


def folder_version(folder: Path) -> int:
    """The newest modification time (ns) of the folder and the files in it: changes when a checkpoint is
    written again under the same name."""
    newest = os.stat(folder).st_mtime_ns
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime_ns)
            except OSError:
                continue
    return newest


def syntax_point(loaded: LoadedModel, sentences: Sequence[DependencySentence], **settings: Any) -> SyntaxPoint:
    """One model's :class:`SyntaxPoint`: one forward over ``sentences``, then the heads and the probe
    (``settings``: ``min_count``, ``max_offset`` for the heads, ``seed``, ``test_share`` for the probe)."""
    features = sentence_features(loaded, sentences)
    heads = head_scores(features, **{k: v for k, v in settings.items() if k in ("min_count", "max_offset")})
    probe = layer_probe(features, **{k: v for k, v in settings.items() if k in ("seed", "test_share")})
    return SyntaxPoint(heads, probe)


def syntax_over_checkpoints(checkpoints: Iterable[CheckpointRef], sentences: Sequence[DependencySentence],
                            cache: PointCache | None = POINTS, **settings: Any) -> SyntaxOverTraining:
    """The measures at each checkpoint, in the order given; a point whose folder, files, data and settings were
    measured before comes from ``cache`` and its model is not loaded."""
    data = fingerprint(sentences)
    labels, steps, points, cached = [], [], [], []
    for ref in cancellation.checked(checkpoints):
        key = None
        if ref.folder is not None and cache is not None:
            key = (str(Path(ref.folder).resolve()), folder_version(Path(ref.folder)), data,
                   tuple(sorted(settings.items())))
        point = cache.get(key) if key is not None else None
        cached.append(point is not None)
        if point is None:
            point = syntax_point(ref.load(), sentences, **settings)
            if key is not None:
                cache.put(key, point)
        labels.append(ref.label)
        steps.append(ref.step)
        points.append(point)
    if not points:
        raise ValueError("no checkpoints given: a training run writes them as it goes")
    return summarise(labels, steps, points, cached)


def summarise(labels: list[str], steps: list[int | None], points: Sequence[SyntaxPoint],
              cached: list[bool]) -> SyntaxOverTraining:
    """The lines over steps from each checkpoint's :class:`SyntaxPoint`."""
    relations = points[0].heads.relations
    best = np.zeros((len(points), len(relations)))
    names: list[list[str]] = []
    for c, point in enumerate(points):
        if point.heads.relations != relations:
            raise ValueError("the checkpoints were measured on different relations")
        rows = {row["relation"]: row for row in point.heads.best_heads()}
        best[c] = [rows[r]["accuracy"] for r in relations]
        names.append([f"{rows[r]['layer']}-{rows[r]['head']}" for r in relations])
    first = points[0].heads
    baseline = np.max([first.baseline[d] for d in DIRECTIONS], axis=0)              # (R,)
    return SyntaxOverTraining(labels=labels, steps=steps, relations=list(relations), best_accuracy=best,
                              best_head=names, baseline=baseline,
                              probe_accuracy=np.stack([p.probe.accuracy for p in points]),
                              selectivity=np.stack([p.probe.selectivity for p in points]), cached=cached)
