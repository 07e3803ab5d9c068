"""How fast a new client connects while a training run starts (issue 38: 4 of 20 ``gradio_client.Client()``
calls once timed out on ``/config`` at httpx's 5 s default while a run was starting).

The app runs as ``python app.py`` in a child process with fresh runs and cache folders (so the run's
preparation really reads, splits, trains a vocabulary and tokenises). The bench times ``GET /config`` and a
whole ``gradio_client.Client(url)`` construction (``/config``, ``/info``, with httpx's default 5 s timeout),
first idle, then for ``--seconds`` after ``/train_start`` (the Training tab's defaults), and prints the medians,
the 90th percentiles, the worst case and the ratio during / idle, and how many connections hit the 5 s timeout.

Usage: python bench/config_while_training.py [--seconds 40] [--port 7871]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
CONNECT_TIMEOUT_S = 5.0          # httpx's default, the one that timed out in the issue


def _serve(port: int, folder: Path) -> subprocess.Popen:
    env = dict(os.environ, EXPLORER_RUNS_DIR=str(folder / "runs"), BERT_ENGINE_CACHE=str(folder / "cache"),
               GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1")
    return subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=(folder / "app.log").open("w"))


def _wait_until_up(url: str, limit_s: float = 300.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/config", timeout=2.0)
            return
        except httpx.HTTPError:
            time.sleep(0.5)
    raise SystemExit(f"the app did not answer at {url} within {limit_s:.0f} s")


def _time(fn) -> float | None:
    """Seconds ``fn`` took, or None when it timed out."""
    start = time.perf_counter()
    try:
        fn()
    except (httpx.TimeoutException, TimeoutError):
        return None
    return time.perf_counter() - start


def _sample(url: str, seconds: float) -> tuple[list[float | None], list[float | None]]:
    """/config and Client() times, alternating, for ``seconds``."""
    config, client = [], []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        config.append(_time(lambda: httpx.get(url + "/config", timeout=CONNECT_TIMEOUT_S)))
        client.append(_time(lambda: Client(url, verbose=False, httpx_kwargs={"timeout": CONNECT_TIMEOUT_S})))
        time.sleep(0.3)
    return config, client


def _summary(name: str, idle: list[float | None], busy: list[float | None]) -> str:
    def stats(values: list[float | None]) -> tuple[float, float, float, int]:
        done = sorted(v for v in values if v is not None)
        p90 = done[min(len(done) - 1, int(0.9 * len(done)))]
        return statistics.median(done), p90, done[-1], len(values) - len(done)
    i50, i90, imax, itimeouts = stats(idle)
    b50, b90, bmax, btimeouts = stats(busy)
    return (f"{name:<10} idle p50 {i50:.2f} s p90 {i90:.2f} s max {imax:.2f} s ({itimeouts} timeouts of {len(idle)}) | "
            f"run starting p50 {b50:.2f} s p90 {b90:.2f} s max {bmax:.2f} s ({btimeouts} timeouts of {len(busy)}) | "
            f"p50 ratio {b50 / i50:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to sample after Start")
    parser.add_argument("--port", type=int, default=7871)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = _serve(args.port, Path(tmp))
        url = f"http://127.0.0.1:{args.port}"
        try:
            _wait_until_up(url)
            idle = _sample(url, 10.0)
            starter = Client(url, verbose=False, httpx_kwargs={"timeout": 120})
            threading.Thread(target=lambda: starter.predict(api_name="/train_start"), daemon=True).start()
            busy = _sample(url, args.seconds)
            runs = sorted(p.name for p in (Path(tmp) / "runs").iterdir()) if (Path(tmp) / "runs").is_dir() else []
        finally:
            app.terminate()
            app.wait(timeout=30)
    print(f"load average before: {os.getloadavg()[0]:.1f}; run folder(s) made: {runs or 'none (the run did not start)'}")
    print(_summary("/config", idle[0], busy[0]))
    print(_summary("Client()", idle[1], busy[1]))


if __name__ == "__main__":
    main()
