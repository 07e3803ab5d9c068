"""bench/families.py on tiny shapes: every family is made by transformers, read by ``engine.load`` and by
transformers (eager and SDPA), the logits agree, and the table has a row per family and batch with finite
ratios (no timing is asserted: machines are noisy)."""
from __future__ import annotations

import math

import pytest

from support.bench_helpers import load_bench_script

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_shape(bench):
    return bench.Shape(layers=2, hidden=48, heads=6, intermediate=60, vocab=120, xlmr_vocab=150, embedding=8,
                       positions=40, tokens=16)


def test_every_family_gives_a_row_per_batch_with_finite_ratios(tmp_path) -> None:
    bench = load_bench_script("families")
    rows = []
    for family in bench.FAMILIES:
        rows += bench.measure(family, tiny_shape(bench), {1: 1, 2: 1}, tmp_path / family, warmup=0)
    assert [(r.family, r.batch) for r in rows] == [(f, b) for f in bench.FAMILIES for b in (1, 2)]
    for r in rows:
        sdpa = () if r.family in bench.NO_SDPA else (r.sdpa, r.ratio_sdpa)     # transformers has none for DeBERTa
        assert all(math.isfinite(x) and x > 0 for x in (r.ours, r.eager, r.ratio_eager, *sdpa))
        assert r.diff_eager <= bench.AGREEMENT and (not sdpa or r.diff_sdpa <= bench.AGREEMENT)
        assert math.isnan(r.sdpa) == (r.family in bench.NO_SDPA)
    lines = bench.table(rows)
    assert lines[0].startswith("| family | batch | ours ms | transformers eager ms | ratio ours/eager")
    assert len(lines) == 2 + len(rows) + 1 and lines[-1].startswith("ratio ours/eager: bert b=1 ")
    assert [line.split(" | ")[0].lstrip("| ") for line in lines[2:-1]] == [r.family for r in rows]


def test_the_tiny_models_have_the_asked_shapes() -> None:
    bench = load_bench_script("families")
    shape = tiny_shape(bench)
    distil = bench.hf_model("distilbert", shape).config
    small = bench.hf_model("electra-small", shape).config
    albert = bench.hf_model("albert", shape).config
    xlmr = bench.hf_model("xlm-roberta", shape).config
    assert distil.n_layers == 1 and distil.dim == 48
    assert (small.embedding_size, small.hidden_size, small.num_attention_heads) == (8, 16, 2)
    assert (albert.embedding_size, albert.hidden_size, albert.num_hidden_groups) == (8, 48, 1)
    assert xlmr.vocab_size == 150 and bench.BASE.xlmr_vocab == 50_000


def test_rotating_times_starts_each_function_first_in_turn() -> None:
    bench = load_bench_script("families")
    calls: list[str] = []
    fns = {name: (lambda n=name: calls.append(n)) for name in ("a", "b", "c")}
    times = bench.rotating_times(fns, rounds=3, warmup=1)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")
    assert all(len(t) == 3 for t in times.values())
