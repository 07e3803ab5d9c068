"""The Syntax tab's figures as two metrics of every experiment arm: cheap (no fine-tuning: one forward per sentence
over the first ``SENTENCES`` sentences of the bundled UD English EWT sample), computed by the tab's own engine
functions (``engine.probes.syntax``: ``sentence_features``, ``head_scores``, ``layer_probe``), never a copy.

* ``best_head_acc``: the tab's best-head table (Clark et al. 2019) summed up: for each relation it scores (at least
  ``heads.MIN_COUNT`` arcs), the accuracy of its best attention head (over both directions) at finding a dependency
  arc's other word, averaged over the relations (each relation counts once). Which head is best for each relation
  (layer from 1, head from 0, as the tab numbers them), the fixed-offset baseline averaged the same way and how
  many relations a head beats it for (the tab's headline) are kept as the arm's ``details``.
* ``probe_best_layer_acc``: the tab's UPOS layer probe at its best layer, the one its headline names ("selectivity
  peaks at layer k": accuracy minus the control task's), with its default split and seed; the layer (0 = the
  embeddings' output) is kept as ``details["probe_best_layer"]``.

Both are higher-is-better fractions; they are measured on the final model of every arm (arms that share a model
show the same numbers, as they do the masked-token accuracy).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import DependencySentence, read_sample
from engine.probes.syntax.features import sentence_features
from engine.probes.syntax.heads import head_scores
from engine.probes.syntax.layer_probe import layer_probe

SYNTAX_METRICS = ("best_head_acc", "probe_best_layer_acc")
SENTENCES = 150             # the bundled sample's first N sentences (of 300): a few seconds per arm on 2 cores
MAX_DETAIL_RELATIONS = 64   # a results.json's best_heads holds at most this many relations (read as untrusted)


@dataclass(frozen=True)
class SyntaxMeasures:
    """One model's two syntax metrics and what they rest on."""

    best_head_acc: float                      # each relation's best head, accuracy averaged over the relations
    probe_best_layer_acc: float               # the UPOS probe's accuracy at its best (most selective) layer
    best_heads: dict[str, list[int]]          # relation -> [layer (from 1), head (from 0)]
    best_head_baseline: float                 # the fixed-offset baseline, averaged the same way
    relations_beaten: int                     # relations whose best head beats the baseline
    probe_best_layer: int                     # 0 = the embeddings' output, 1..L the encoder layers

    def metrics(self) -> dict[str, float]:
        """The two metrics by ``SYNTAX_METRICS`` key."""
        return {"best_head_acc": self.best_head_acc, "probe_best_layer_acc": self.probe_best_layer_acc}

    def details(self) -> dict[str, Any]:
        """Plain JSON of what the metrics rest on (an arm's ``details`` in results.json)."""
        return {"best_heads": {r: list(lh) for r, lh in self.best_heads.items()},
                "best_head_baseline": self.best_head_baseline, "relations_beaten": self.relations_beaten,
                "probe_best_layer": self.probe_best_layer}


def syntax_sentences(count: int = SENTENCES) -> list[DependencySentence]:
    """The sentences every arm is measured on: the bundled sample's first ``count``."""
    return read_sample()[:count]


def syntax_measures(loaded: LoadedModel, sentences: Sequence[DependencySentence] | None = None) -> SyntaxMeasures:
    """Both syntax metrics of ``loaded`` on ``sentences`` (None: ``syntax_sentences()``): one forward per sentence,
    then the Syntax tab's head scores and layer probe."""
    features = sentence_features(loaded, syntax_sentences() if sentences is None else sentences)
    if len(features.sentences) < 2:
        raise ValueError("the model can read fewer than 2 of the syntax sentences: its vocabulary lacks their words")
    rows = head_scores(features).best_heads()
    probe = layer_probe(features)
    best = probe.best_layer
    return SyntaxMeasures(
        best_head_acc=float(np.mean([row["accuracy"] for row in rows])),
        probe_best_layer_acc=float(probe.accuracy[best]),
        best_heads={row["relation"]: [row["layer"], row["head"]] for row in rows},
        best_head_baseline=float(np.mean([row["baseline"] for row in rows])),
        relations_beaten=sum(row["margin"] > 0 for row in rows), probe_best_layer=best)


def read_details(raw: Any) -> dict[str, Any]:
    """An arm's ``details`` as read from an untrusted results.json (absent: ``{}``), checked and typed; a
    ``ValueError`` when it is malformed."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError("details is not an object")
    found: dict[str, Any] = {}
    if "best_heads" in raw:
        heads = raw["best_heads"]
        if not isinstance(heads, Mapping) or len(heads) > MAX_DETAIL_RELATIONS:
            raise ValueError("details.best_heads is not an object of relations")
        found["best_heads"] = {str(r)[:40]: _pair(v) for r, v in heads.items()}
    for key in ("best_head_baseline",):
        if key in raw:
            found[key] = float(raw[key])
    for key in ("relations_beaten", "probe_best_layer"):
        if key in raw:
            found[key] = _whole(raw[key])
    return found


def _whole(value: Any) -> int:
    """A non-negative int (not a bool or a float) from JSON, else a ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a layer, head or count")
    return value


def _pair(value: Any) -> list[int]:
    """``[layer, head]`` from JSON."""
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{value!r} is not [layer, head]")
    return [_whole(value[0]), _whole(value[1])]


def head_text(details: Mapping[str, Any]) -> str:
    """``det 2-1; nsubj 1-0`` (layer-head per relation, as the Syntax tab writes them), "" without."""
    return "; ".join(f"{r} {lh[0]}-{lh[1]}" for r, lh in dict(details.get("best_heads") or {}).items())
