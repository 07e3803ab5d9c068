"""bench/probe_tabs_scale.py: one round on a tiny served app; each option change is answered without the model."""
from __future__ import annotations

import math

from engine.text.tokenizer import WordPieceTokenizer
from support.bench_helpers import load_bench_script
from support.probing_helpers import make_services


def test_a_round_measures_every_case_and_the_changes_read_what_the_first_call_kept(
        tiny_tokenizer: WordPieceTokenizer, monkeypatch) -> None:
    import app

    bench = load_bench_script("probe_tabs_scale")
    monkeypatch.setattr(bench, "WINDOW", (64, 16))               # the tiny model has 64 positions
    services = make_services(tiny_tokenizer)
    demo = app.create_app(services)
    model = services.model("default").model
    runs = {"forward": 0}
    model.register_forward_pre_hook(lambda *_: runs.__setitem__("forward", runs["forward"] + 1))   # every run
    per_call: list[int] = []
    with bench.serve(demo) as client:
        caller = bench.Caller(client.src, demo)
        call = caller.call

        def call_and_count(api, data):
            before = runs["forward"]
            found = call(api, data)
            per_call.append(runs["forward"] - before)
            return found
        caller.call = call_and_count
        rows = bench.run_model(caller, "default", rounds=1, lengths=(20,))
    names = [case for _, _, case, _ in rows]
    assert names == ["fill first", "fill top-k 10", "fill zoom", "qa first", "qa top-k 3", "qa max answer 30",
                     "qa allow no answer", "why first", "why again", "noop"]
    assert all(s[0] > 0 and s[1] > 20 and s[2] > 20 for *_, samples in rows for s in samples)
    model_runs = dict(zip(names[:-1], per_call))             # the three no-ops are the last calls
    assert all(model_runs[c] > 0 for c in ("fill first", "qa first", "why first")), model_runs
    assert all(n == 0 for c, n in model_runs.items() if "first" not in c), model_runs   # changes: no model
    lines = bench.report(rows)
    assert lines[0].startswith("| model | tokens | case | server s") and len(lines) == 2 + len(rows)
    ratios = [float(line.split("|")[7]) for line in lines[2:] if "first" not in line and "noop" not in line]
    assert ratios and all(math.isfinite(r) and r > 0 for r in ratios)
