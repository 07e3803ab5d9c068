"""bench/explorer_scale.py: one round on a tiny served app; a layer change is answered from the forward cache."""
from __future__ import annotations

import math

import httpx

from support.bench_helpers import load_bench_script
from engine.text.tokenizer import WordPieceTokenizer
from support.probing_helpers import make_services


def test_a_round_measures_the_first_call_the_layer_changes_and_the_noop(tiny_tokenizer: WordPieceTokenizer) -> None:
    import app

    bench = load_bench_script("explorer_scale")
    services = make_services(tiny_tokenizer)
    config = services.model("default").config
    shape = (config.num_hidden_layers, config.num_attention_heads)
    rows = []
    with bench.serve(app.create_app(services)) as client:
        http = httpx.Client(timeout=120)
        for api in ("/attention", "/embeddings", "/neuron_view"):
            found = bench.run_case(http, client.src, api, "default", shape, 20, rounds=1)
            assert [len(found[k]) for k in ("first", "change", "noop")] == [1, 2, 1]
            assert all(s.seconds > 0 and s.nbytes > 20 and s.peak_mb > 0 for v in found.values() for s in v)
            rows.append(("default", 20, api, bench.summarise(found)))
    stats = services.forward_cache.stats
    assert stats.misses == 3 and stats.hits == 6              # one forward per endpoint, both changes from the cache
    assert all(math.isfinite(s["ratio"]) and s["ratio"] > 0 for *_, s in rows)
    lines = bench.report(rows)
    assert lines[0].startswith("| model | tokens | endpoint") and len(lines) == 2 + 3 + 2
    assert lines[-2].startswith("ratio layer change / no-op: default 20 /attention ")


def test_texts_have_the_asked_number_of_pieces_and_differ_per_variant(tiny_tokenizer: WordPieceTokenizer) -> None:
    bench = load_bench_script("explorer_scale")
    from engine.text.tokenizer import WordPieceTokenizer as Tokenizer
    from explorer.services import DEFAULT_TOKENIZER_DIR

    bundled = Tokenizer.from_file(DEFAULT_TOKENIZER_DIR)
    for tokens in bench.LENGTHS:
        assert len(bundled.encode(bench.text_of(tokens, 1), None, max_length=512).input_ids) == tokens
    assert bench.text_of(20, 1) != bench.text_of(20, 2)
