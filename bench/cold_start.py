"""Cold start: seconds from spawning ``python app.py`` to the app answering HTTP 200 on ``/``.

Each repeat spawns a fresh ``python app.py`` on a free loopback port (GRADIO_SERVER_PORT),
polls ``http://127.0.0.1:<port>/`` until it answers 200, then stops the process. Prints
each start, the median and the goal (<= 12 s on a 2-core CPU).

Reference measured in the same run: a bare ``python -c "import gradio, torch"`` (the
floor our dependencies set; the app cannot start faster than importing them). The ratio
app/floor says how much start-up is ours rather than the libraries'.

``--phases`` also times the start-up phases in one fresh process (imports, services,
building the Blocks, launch) so you can see what dominates.

Usage: python bench/cold_start.py [--repeats 3] [--phases] [--timeout 120]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 12.0
POLL_S = 0.05

# Runs in a fresh interpreter; prints one JSON line {phase: seconds}.
PHASES_CODE = r"""
import json, os, sys, time
t0 = time.perf_counter(); marks = {}
def mark(name):
    global t0
    now = time.perf_counter(); marks[name] = now - t0; t0 = now
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False"); os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.getcwd())
import torch; mark("import torch")
import gradio; mark("import gradio")
import engine.checkpoints.hf_format, explorer.models.registry, engine.text.tokenizer; mark("import engine (registry, checkpoints)")
import explorer.page, explorer.services; mark("import explorer")
import app; mark("import app")
services = explorer.services.default_services(); mark("default_services() (tokenizer, worker, registry)")
from explorer.models import picker as model_picker
from explorer.attention import tab as attention_tab
from explorer.embeddings import tab as embeddings_tab
from explorer.fill_mask import tab as fill_mask_tab
from explorer.qa import tab as qa_tab
from explorer.tokenize import tab as tokenize_tab
from explorer.training import tab as training_tab
mark("import the tab modules")
demo = app.create_app(services); mark("create_app() (build the Blocks, queue)")
demo.launch(prevent_thread_lock=True, quiet=True, theme=explorer.page.THEME, css=explorer.page.CSS); mark("launch()")
demo.close()
print(json.dumps(marks))
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers_200(url: str) -> bool:
    """True when ``url`` answers HTTP 200 right now."""
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def app_env(port: int, runs_dir: str) -> dict[str, str]:
    """The environment for a spawned app: loopback, a given port, runs in a scratch folder."""
    env = dict(os.environ, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port),
               EXPLORER_RUNS_DIR=runs_dir, GRADIO_ANALYTICS_ENABLED="False")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def stop(process: subprocess.Popen) -> None:
    """Terminate a spawned process (kill if it does not exit within 10 s)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def time_to_serving(command: list[str], timeout_s: float, log: Path) -> float:
    """Seconds from spawning ``command`` (an app reading GRADIO_SERVER_PORT) to ``/`` answering 200."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with tempfile.TemporaryDirectory() as runs, open(log, "w") as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=app_env(port, runs), stdout=out, stderr=subprocess.STDOUT)
        try:
            while not answers_200(url):
                if process.poll() is not None:
                    raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}; see {log}")
                if time.perf_counter() - start > timeout_s:
                    raise TimeoutError(f"no HTTP 200 from {url} within {timeout_s:.0f} s; see {log}")
                time.sleep(POLL_S)
            return time.perf_counter() - start
        finally:
            stop(process)


def time_command(code: str) -> float:
    """Seconds a fresh ``python -c code`` takes, start to exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env=app_env(free_port(), tempfile.gettempdir()))
    return time.perf_counter() - start


def phases() -> dict[str, float]:
    """Seconds per start-up phase, measured in one fresh interpreter."""
    with tempfile.TemporaryDirectory() as runs:
        done = subprocess.run([sys.executable, "-c", PHASES_CODE], cwd=ROOT, env=app_env(free_port(), runs),
                              check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="app starts to time (default 3)")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up on one start after this many s")
    parser.add_argument("--phases", action="store_true", help="also time the start-up phases")
    parser.add_argument("--app", default="app.py", help="the script to start (default app.py)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    starts, floors = [], []
    with tempfile.TemporaryDirectory() as logs:
        for index in range(args.repeats):
            # Alternate app and floor so a drifting machine slows both alike.
            floors.append(time_command("import gradio, torch"))
            log = Path(logs) / f"app-{index}.log"
            starts.append(time_to_serving([sys.executable, args.app], args.timeout, log))
            print(f"start {index + 1}: {starts[-1]:6.2f} s to HTTP 200   "
                  f"(import gradio+torch alone: {floors[-1]:5.2f} s)")
    median, floor = statistics.median(starts), statistics.median(floors)
    verdict = "met" if median <= GOAL_S else "NOT met"
    print(f"median {median:.2f} s (goal <= {GOAL_S:.0f} s on 2 cores: {verdict}); "
          f"import floor {floor:.2f} s; ratio app/floor {median / floor:.2f}")
    if args.phases:
        marks = phases()
        total = sum(marks.values())
        print("start-up phases (one fresh process):")
        for name, seconds in marks.items():
            print(f"  {name:52s} {seconds:6.2f} s  {100 * seconds / total:5.1f}%")


if __name__ == "__main__":
    main()
