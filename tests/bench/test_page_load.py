"""bench/page_load.py: one round in chromium on a tiny served app and a bare Gradio page."""
from __future__ import annotations

from engine.text.tokenizer import WordPieceTokenizer
from support.bench_helpers import load_bench_script
from support.probing_helpers import make_services


def test_a_round_times_both_pages_cold_and_warm_and_the_first_canvas(tiny_tokenizer: WordPieceTokenizer) -> None:
    import app

    bench = load_bench_script("page_load")
    services = make_services(tiny_tokenizer)
    try:
        with bench.serve(app.create_app(services)) as client, bench.serve(bench.bare_page()) as bare:
            found = bench.measure(client.src, bare.src, rounds=1)
    finally:
        services.get_worker().close(timeout_s=30)
    assert {k: len(v) for k, v in found.items()} == {"bare cold": 1, "bare warm": 1, "app cold": 1, "app warm": 1,
                                                    "drawing cold": 1, "drawing warm": 1, "plotly KB cold": 1}
    assert all(v[0] > 0 for k, v in found.items() if k != "plotly KB cold")
    assert found["plotly KB cold"][0] == 0          # the canvas is drawn before Plotly's bundle is fetched
