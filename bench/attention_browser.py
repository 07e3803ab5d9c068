"""The Attention tab's canvas views (issue 34, part 2: Python prepares, the browser draws).

1. **Payload** per case (model x tokens): the bytes of a first ``/attention`` answer on the browser queue's
   route (what a page receives: the maps, the model view's grid, the statistics figure and table), split into
   the heatmap's maps and the model view's grid; and what a layer change costs: 0 bytes when the page holds
   every layer's maps (``explorer.attention.canvas.chosen_maps``), else the answer to its ``fetch`` (the
   heatmap's value for the new layer: the JSON of that output); a *Heads in the head view* change (the head
   view's value alone) and a *Head statistic* change (the statistics figure alone). Arrays are deflated when
   that helps (``explorer.views.browser_arrays``): the maps column says which.
2. **Browser** (headless chromium through Playwright, the default model): "type a layer + Enter -> redrawn"
   at ``--tokens`` (default 128), the median of ``--repeats`` (>= 5) changes, each timed from before the
   typing to the heatmap's ``data-drawn`` naming the new layer; the reference, in the same run, is the same
   change at 512 tokens, where the page lacks the other layers' maps and asks the server (one round trip, the
   forward cache answering). Also "Show attention -> first drawing" for a new text.

   With the large model (a random bert-large-sized one, 24 x 16 heads), the same typed change at 512 tokens,
   where every change is fetched.

Usage: python bench/attention_browser.py [--tokens 128] [--repeats 7] [--no-large]
  (1-3 minutes on 2 cores with the large model, by the load).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402

from bench.explorer_scale import SESSION, add_large, text_of  # noqa: E402
from bench.ui_latency import bench_services, serve  # noqa: E402
from explorer.attention import canvas  # noqa: E402

DRAWN = "(want) => (document.querySelector('.attention-heatmap .attn-view') || {dataset: {}}).dataset.drawn === want"


def answer(http: httpx.Client, base: str, data: list) -> list:
    """One ``/attention`` call on the browser queue's route; (its outputs, the bytes of the stream)."""
    event = http.post(f"{base}gradio_api/call/attention", json={"data": data, "session_hash": SESSION})
    event.raise_for_status()
    body = http.get(f"{base}gradio_api/call/attention/{event.json()['event_id']}").content
    line = [row for row in body.split(b"\n") if row.startswith(b"data:")][-1]
    return [json.loads(line[5:]), len(body)]


def payload_rows(http: httpx.Client, base: str, models: dict[str, tuple[int, int]]) -> list[str]:
    """The payload table: first answer, its maps and grid, and a layer change's bytes, per model and length."""
    lines = ["| model | tokens | first answer KB | maps KB | model-view grid KB | layer change KB | heads change B "
             "| statistic change KB |", "|---|---|---|---|---|---|---|---|"]
    for key, (layers, heads) in models.items():
        for length in (20, 128, 512):
            text = text_of(length, variant=length + 3 * layers)
            outputs, first = answer(http, base, [key, text, "", 1, 0, length, list(range(heads)), "entropy"])
            heat, _, grid = outputs[:3]
            held = heat["map_layers"] == list(range(layers))
            # a fetch for the input the page holds is answered with the heatmap's value alone (the rest skipped)
            change = 0 if held else len(json.dumps(answer(http, base, [key, text, "", 2, 0, length,
                                                                   list(range(heads)), "entropy"])[0][0]))
            heads_change = len(json.dumps(canvas.head_view_value(range(heads), None)))   # the head view's value alone
            statistic_change = len(json.dumps(outputs[3]))       # the statistics figure alone (another statistic's)
            lines.append(f"| {key} | {len(heat['tokens'])} | {first / 1e3:.0f} | {len(heat['maps']['data']) / 1e3:.0f} "
                         f"({heat['maps'].get('compression', 'none')}) | {len(grid['grid']['data']) / 1e3:.0f} | "
                         f"{change / 1e3:.0f}{' (held)' if held else ' (fetch)'} | {heads_change} | "
                         f"{statistic_change / 1e3:.0f} |")
            print(lines[-1], flush=True)
    return lines


def layer_changes(page, tokens: int, repeats: int) -> tuple[float, list[float]]:
    """Show attention for a new ``tokens``-token text (seconds to the first drawing), then ``repeats`` typed
    layer changes: their seconds from before the typing to the new drawing."""
    panel = page.locator("[role=tabpanel]:visible").first
    panel.get_by_label("Text", exact=True).fill(text_of(tokens, variant=tokens))
    length = panel.get_by_label("Max length", exact=False).first.locator(
        "xpath=ancestor::div[contains(@class,'block')][1]").locator("input[type=number]")
    length.fill(str(tokens))
    length.press("Enter")
    box = panel.locator("#attention-layer input[type=number]")
    box.fill("1")
    box.press("Enter")
    page.wait_for_timeout(300)
    before = page.evaluate("() => window.BertAttentionViews ? window.BertAttentionViews.store.current : null")
    start = time.perf_counter()
    panel.get_by_role("button", name="Show attention").click()
    page.wait_for_function(f"(old) => window.BertAttentionViews.store.current !== old && ({DRAWN})('L1-H0')",
                           arg=before, timeout=600_000)
    first = time.perf_counter() - start
    panel.locator(".js-plotly-plot .heatmaplayer").first.wait_for(state="attached", timeout=600_000)
    page.wait_for_timeout(1000)                     # the statistics' Plotly figure (its bundle, once) is drawn
    times = []
    for i in range(repeats):
        layer = 2 + i % 5
        start = time.perf_counter()
        box.fill(str(layer))
        box.press("Enter")
        page.wait_for_function(DRAWN, arg=f"L{layer}-H0", polling="raf", timeout=600_000)
        times.append(time.perf_counter() - start)
        page.wait_for_timeout(200)
    return first, times


def browser_rows(url: str, model: str, cases: list[tuple[int, str]], repeats: int) -> tuple[list[str], list[float]]:
    """The browser table's rows for ``cases`` (tokens, how the change is served) on the served ``model``, and
    the medians of the layer changes (seconds)."""
    from playwright.sync_api import sync_playwright

    from support.browser_helpers import ARGS, find_browser

    rows, medians = [], []
    with sync_playwright() as playwright:
        path = find_browser(playwright.chromium.executable_path)
        browser = playwright.chromium.launch(executable_path=path, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 1000})
            page.goto(url)
            page.get_by_role("tab", name="Attention", exact=True).click()
            for length, how in cases:
                first, times = layer_changes(page, length, repeats)
                medians.append(statistics.median(times))
                rows.append(f"| {model} | {length} | {how} | {medians[-1] * 1e3:.0f} | {min(times) * 1e3:.0f}-"
                            f"{max(times) * 1e3:.0f} | {first:.2f} s |")
                print(rows[-1], flush=True)
        finally:
            browser.close()
    return rows, medians


def large_services(runs: Path):
    """Services whose ``default`` is the random bert-large-sized model (the page's picker starts on it)."""
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    services, _ = bench_services(DEFAULT_MODEL_DIR, Path(runs))
    add_large(services)
    services.registry().pin("default", services.model("large"))
    return services


def main() -> None:
    import app
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-large", action="store_true", help="leave out the bert-large-sized model")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; budgets: "
          f"all layers <= {canvas.ALL_LAYERS_BUDGET:,} values, else a layer's heads <= {canvas.LAYER_BUDGET:,}; "
          f"grid <= {canvas.GRID_BUDGET:,}")
    with tempfile.TemporaryDirectory() as runs:
        services, described = bench_services(DEFAULT_MODEL_DIR, Path(runs))
        config = services.model("default").config
        models = {"default": (config.num_hidden_layers, config.num_attention_heads)}
        repeats = max(5, args.repeats)
        rows = ["| model | tokens | layer change | median ms | min-max ms | Show attention -> drawn |",
                "|---|---|---|---|---|---|"]
        try:
            with serve(app.create_app(services)) as client:
                found, medians = browser_rows(client.src, "default", [(args.tokens, "held in the page"),
                                                                      (512, "fetched (reference)")], repeats)
                rows += found
                rows.append(f"ratio held / fetched: {medians[0] / medians[1]:.2f} (of {repeats} changes each)")
                if not args.no_large:
                    models["large"] = add_large(services)
                rows += payload_rows(httpx.Client(timeout=900), client.src, models)
        finally:
            services.get_worker().close(timeout_s=60)
        if not args.no_large:
            services = large_services(Path(runs))
            try:
                with serve(app.create_app(services)) as client:
                    rows += browser_rows(client.src, "large", [(512, "fetched")], repeats)[0]
            finally:
                services.get_worker().close(timeout_s=60)
    print(f"default model: {described}; load average after: {os.getloadavg()[0]:.2f}")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
