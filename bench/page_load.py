"""Page load to interactive, and the first canvas drawing (issue 34: "page load to interactive <= 2 s idle; the
first figure does not wait on a 4.6 MB bundle").

In headless chromium (Playwright), ``--rounds`` times (>= 5), each in a fresh browser context (an empty cache,
as a first visit) and then once reloaded in it (a warm cache):

* **interactive**: from ``goto`` to the model description naming the model's heads (the page's load event has
  answered, so a click runs a tab);
* **first drawing**: from clicking the Attention tab's first example to its heatmap canvas drawn
  (``data-drawn``), and whether Plotly's bundle had been fetched by then (its bytes and when it arrived);
* **the reference**, served by the same process in the same run: a bare ``gr.Blocks`` with one Markdown and
  one button, "interactive" when its button is visible (Gradio's own floor for a page).

It prints medians and the ratios app / bare page. Usage: python bench/page_load.py [--rounds 5] (1-2 minutes).
"""
from __future__ import annotations

import argparse
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

import gradio as gr

from bench.ui_latency import bench_services, serve

HEATMAP = ".attention-heatmap .attn-view"


def bare_page() -> gr.Blocks:
    """Gradio's floor: one Markdown and one button, no events."""
    with gr.Blocks() as demo:
        gr.Markdown("A bare page")
        gr.Button("Go", elem_id="bare-go")
    return demo


def plotly_requests(page) -> list[dict]:
    """Every Plotly chunk the page fetches, with its size and the moment it finished (perf_counter)."""
    seen: list[dict] = []

    def finished(request) -> None:
        if "plotly" in request.url.lower():
            at = time.perf_counter()
            try:
                response = request.response()
                body = len(response.body()) if response is not None else 0
            except Exception:                   # noqa: BLE001 (the page closed meanwhile: the size is unknown)
                body = 0
            seen.append({"url": request.url, "bytes": body, "at": at})
    page.on("requestfinished", finished)
    return seen


def app_round(context, url: str) -> dict[str, float]:
    """One visit to the app: seconds to interactive, to the first heatmap drawing, and Plotly's share so far."""
    page = context.new_page()
    page.set_viewport_size({"width": 1360, "height": 1000})
    plotly = plotly_requests(page)
    start = time.perf_counter()
    page.goto(url)
    page.locator(".model-info").last.filter(has_text="Heads:").wait_for(timeout=120_000)
    interactive = time.perf_counter() - start
    page.get_by_role("tab", name="Attention", exact=True).click()
    panel = page.locator("[role=tabpanel]:visible").first
    clicked = time.perf_counter()
    panel.locator("tr.tr-body").first.locator("td").first.click()
    page.wait_for_function(f"() => !!(document.querySelector('{HEATMAP}') || {{dataset: {{}}}}).dataset.drawn",
                           timeout=120_000)
    drawn = time.perf_counter()
    before = [r for r in plotly if r["at"] <= drawn]
    page.close()
    return {"interactive": interactive, "first_drawing": drawn - clicked,
            "plotly_kb_before_drawing": sum(r["bytes"] for r in before) / 1024}


def bare_round(context, url: str) -> float:
    """One visit to the bare page: seconds to its button showing."""
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.locator("#bare-go").wait_for(state="visible", timeout=60_000)
    seconds = time.perf_counter() - start
    page.close()
    return seconds


def measure(app_url: str, bare_url: str, rounds: int) -> dict[str, list[float]]:
    """Cold (fresh context) and warm (the same context again) rounds of both pages, interleaved."""
    from playwright.sync_api import sync_playwright
    from support.browser_helpers import ARGS, find_browser

    found: dict[str, list[float]] = {k: [] for k in ("bare cold", "bare warm", "app cold", "app warm",
                                                      "drawing cold", "drawing warm", "plotly KB cold")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_browser(playwright.chromium.executable_path),
                                             args=ARGS)
        try:
            for _ in range(rounds):
                context = browser.new_context()                 # an empty cache: a first visit, then a return
                for how in ("cold", "warm"):
                    found[f"bare {how}"].append(bare_round(context, bare_url))
                    visit = app_round(context, app_url)
                    found[f"app {how}"].append(visit["interactive"])
                    found[f"drawing {how}"].append(visit["first_drawing"])
                    if how == "cold":
                        found["plotly KB cold"].append(visit["plotly_kb_before_drawing"])
                context.close()
        finally:
            browser.close()
    return found


def main() -> None:
    import app
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds = max(5, args.rounds)
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {rounds} rounds")
    with tempfile.TemporaryDirectory() as runs:
        services, described = bench_services(DEFAULT_MODEL_DIR, Path(runs))
        try:
            with serve(app.create_app(services)) as client, serve(bare_page()) as bare:
                found = measure(client.src, bare.src, rounds)
        finally:
            services.get_worker().close(timeout_s=60)
    median = {k: statistics.median(v) for k, v in found.items()}
    print(f"default model: {described}; load average after: {os.getloadavg()[0]:.2f}")
    print("| cache | bare page -> button s | app -> interactive s | app / bare | Attention example -> canvas drawn s |")
    print("|---|---|---|---|---|")
    for how in ("cold", "warm"):
        print(f"| {how} | {median[f'bare {how}']:.2f} | {median[f'app {how}']:.2f} | "
              f"{median[f'app {how}'] / median[f'bare {how}']:.1f} | {median[f'drawing {how}']:.2f} |")
    print(f"Plotly fetched before the first canvas drawing (cold): {median['plotly KB cold']:.0f} KB (median); "
          f"the range of app -> interactive, cold: {min(found['app cold']):.2f}-{max(found['app cold']):.2f} s")


if __name__ == "__main__":
    main()
