"""Watching costs nothing: pretraining steps per second with 0, 1 and 3 browser pages showing the Training tab.

The app is built and served on loopback as ``bench.ui_latency`` does (the bundled default model's services, a
fresh runs folder); one pretraining run with the Training tab's defaults (Shakespeare, the tiny preset) is started
through ``/train_start`` and runs throughout. Then, in ``--rounds`` rounds, each of the three settings (0, 1, 3
headless chromium pages open on the Training tab) is held for ``--seconds`` seconds in turn and the steps the
worker took are counted; the settings alternate within a round, so a machine whose speed drifts biases each alike.

Printed: steps/s per setting (median over rounds), the ratio to no page open (the figure; goals: one page
>= 0.90, three pages >= 0.80, i.e. <= 10% and <= 20% slowdown), and the 1-minute load average before and after. The pages and the training share the machine's cores,
as a laptop or a 2-core Space does.

Usage: python bench/watch_cost.py [--rounds 3] [--seconds 20] [--threads T]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.ui_latency import TRAINING, bench_services, serve, start_training  # noqa: E402

SETTINGS = (0, 1, 3)
GOALS = {1: 0.90, 3: 0.80}
SETTLE_S = 4.0          # after the pages open: their first full draw is not what watching costs


@contextlib.contextmanager
def pages_on_training_tab(browser: Any, url: str, count: int) -> Iterator[None]:
    """``count`` pages, each in its own context (a visitor each), showing the Training tab while the block runs."""
    contexts = []
    try:
        for _ in range(count):
            context = browser.new_context(viewport={"width": 1366, "height": 900})
            page = context.new_page()
            page.goto(url)
            page.get_by_role("tab", name="Training").first.click()
            contexts.append(context)
        yield
    finally:
        for context in contexts:
            context.close()


def steps_per_second(worker: Any, seconds: float) -> float:
    """Steps the worker's run took in ``seconds``, per second."""
    first, start = worker.status().step, time.perf_counter()
    time.sleep(seconds)
    return (worker.status().step - first) / (time.perf_counter() - start)


def measure(url: str, worker: Any, rounds: int, seconds: float) -> dict[int, list[float]]:
    """Per setting (pages open): steps/s, one value per round."""
    from playwright.sync_api import sync_playwright

    from support.browser_helpers import ARGS, find_browser

    found: dict[int, list[float]] = {n: [] for n in SETTINGS}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_browser(playwright.chromium.executable_path),
                                             args=ARGS)
        try:
            for r in range(rounds):
                for count in SETTINGS:
                    with pages_on_training_tab(browser, url, count):
                        time.sleep(SETTLE_S)
                        rate = steps_per_second(worker, seconds)
                        found[count].append(rate)
                    print(f"round {r + 1}: {count} page(s) open: {rate:.2f} steps/s", flush=True)
        finally:
            browser.close()
    return found


def report(found: dict[int, list[float]], loads: tuple[float, float]) -> list[str]:
    """The table: steps/s, the ratio to no page open, and whether each goal is met."""
    base = statistics.median(found[0])
    lines = [f"load average (1 min) before {loads[0]:.2f}, after {loads[1]:.2f}; {os.cpu_count()} cores",
             "pages open | steps/s (median) | ratio to 0 pages | goal"]
    for count in SETTINGS:
        rate = statistics.median(found[count])
        goal = GOALS.get(count)
        verdict = "" if goal is None else f">= {goal:.2f}: {'met' if rate / base >= goal else 'NOT met'}"
        lines.append(f"{count} | {rate:.2f} | {rate / base:.3f} | {verdict}")
    return lines


def main() -> None:
    import torch

    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three settings (default 3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds each setting is timed (default 20)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import app

    with tempfile.TemporaryDirectory() as runs:
        services, described = bench_services(DEFAULT_MODEL_DIR, Path(runs))
        print(f"model: {described}; training: the Training tab's defaults ({TRAINING[0]} preset, {TRAINING[1]})")
        with serve(app.create_app(services)) as client:
            loads = [os.getloadavg()[0]]
            start_training(client, services.worker, TRAINING)
            try:
                found = measure(client.src, services.worker, args.rounds, args.seconds)
            finally:
                services.worker.stop(wait_s=60)
            loads.append(os.getloadavg()[0])
    print("\n".join(report(found, (loads[0], loads[1]))))


if __name__ == "__main__":
    main()
