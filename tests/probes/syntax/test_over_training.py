"""The syntax measures over checkpoints: one point per checkpoint equal to the measures on that model, cached by
folder and modification time (a rewritten checkpoint is measured again; a model with no folder never cached)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.heads import DIRECTIONS
from engine.probes.syntax.over_training import CheckpointRef, PointCache, syntax_over_checkpoints, syntax_point
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "the cat sat on the mat and a dog ran to the big red tree".split()


def sentences(count: int = 12) -> list[DependencySentence]:
    """Word i hangs off word i - 1 ('dep') or, every third word, off the first ('amod'); UPOS cycles."""
    found = []
    for n in range(count):
        words = tuple(WORDS[(n + i) % len(WORDS)] for i in range(5 + n % 4))
        heads = tuple(0 if i == 0 else (1 if i % 3 == 0 else i) for i in range(len(words)))
        rels = tuple("root" if i == 0 else ("amod" if i % 3 == 0 else "dep") for i in range(len(words)))
        tags = tuple(("NOUN", "VERB", "DET")[i % 3] for i in range(len(words)))
        found.append(DependencySentence(words, heads, rels, tags))
    return found


def model(make_config, tokenizer, seed: int) -> LoadedModel:
    bert = randomize_(BertWithHeads(make_config(), heads=("mlm",)), seed, scale=0.3).eval()
    return LoadedModel(bert, tokenizer, bert.config, f"seed {seed}")


def test_points_equal_the_measures_and_are_cached(make_config, tiny_tokenizer, tmp_path) -> None:
    data = sentences()
    folders = [tmp_path / "step-000100", tmp_path / "step-000200"]
    for folder in folders:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x")
    loads: list[int] = []

    def ref(index: int, folder) -> CheckpointRef:
        def load() -> LoadedModel:
            loads.append(index)
            return model(make_config, tiny_tokenizer, index)
        return CheckpointRef(f"step {100 * (index + 1)}", 100 * (index + 1), folder, load)

    cache = PointCache(entries=8)
    refs = [ref(0, folders[0]), ref(1, folders[1]), ref(2, None)]
    found = syntax_over_checkpoints(refs, data, cache=cache, min_count=3)
    assert found.steps == [100, 200, 300] and found.cached == [False, False, False] and loads == [0, 1, 2]
    direct = syntax_point(model(make_config, tiny_tokenizer, 1), data, min_count=3)
    rows = {row["relation"]: row for row in direct.heads.best_heads()}
    assert found.relations == direct.heads.relations
    np.testing.assert_allclose(found.best_accuracy[1], [rows[r]["accuracy"] for r in found.relations])
    assert found.best_head[1] == [f"{rows[r]['layer']}-{rows[r]['head']}" for r in found.relations]
    np.testing.assert_allclose(found.probe_accuracy[1], direct.probe.accuracy)
    np.testing.assert_allclose(found.selectivity[1], direct.probe.selectivity)
    np.testing.assert_allclose(found.baseline, np.max([direct.heads.baseline[d] for d in DIRECTIONS], axis=0))

    again = syntax_over_checkpoints(refs, data, cache=cache, min_count=3)
    assert again.cached == [True, True, False] and loads == [0, 1, 2, 2]     # no folder: measured again
    np.testing.assert_array_equal(again.best_accuracy, found.best_accuracy)
    other = syntax_over_checkpoints(refs[:1], data[:-1], cache=cache, min_count=3)   # other data: a new key
    assert other.cached == [False]
    stamp = os.stat(folders[0] / "model.safetensors").st_mtime_ns + 10**9
    os.utime(folders[0] / "model.safetensors", ns=(stamp, stamp))             # the checkpoint written again
    assert syntax_over_checkpoints(refs[:1], data, cache=cache, min_count=3).cached == [False]
    assert len(cache) == 4 and found.to_pipeline()["points"][0]["step"] == 100


def test_the_cache_is_bounded_and_nothing_is_an_error(make_config, tiny_tokenizer) -> None:
    cache = PointCache(entries=2)
    for key in "abc":
        cache.put(key, object())
    assert len(cache) == 2 and cache.get("a") is None and cache.get("c") is not None
    with pytest.raises(ValueError, match="no checkpoints given"):
        syntax_over_checkpoints([], sentences(), cache=cache)
