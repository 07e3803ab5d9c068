"""Time to step 1: seconds from pressing Start on the Training tab's defaults to the run's first step, per stage.

Each measurement runs in a fresh process that imports ``app`` first, as the app's own process has (a worker
process spawned there would re-import it), starts the tab's default run (``explorer.training.job.make_spec``
with the widgets' defaults: tiny, shakespeare, 200 documents, a 4,000-piece vocabulary trained on them) on a
``TrainingWorker`` and polls its status every 20 ms, timing each preparation stage (the message up to its
first ":") and step 1.

Reference measured in the same run: the same start on a warm cache (the count, the vocabulary and the tokens
already cached, so no reading, vocabulary training or tokenising: the floor the stages add to). Prints each
run's stages, the medians, the ratio cold/warm, the goal (step 1 within 15 s idle on 2 cores) and the load
average with every figure (a loaded machine is slower; say so with the figures).

Usage: python bench/first_step.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 15.0
POLL_S = 0.02


def one_run(cache: str) -> dict:
    """Start the tab's default run with ``cache`` as the token cache; the stages' seconds and step 1's."""
    os.environ["BERT_ENGINE_CACHE"] = cache
    sys.path.insert(0, str(ROOT))
    import app      # the app's process: what a spawned worker would import again
    assert app.__name__ == "app"
    from engine.training.worker.training_worker import TrainingWorker
    from explorer.training.job import make_spec

    class Limits:
        max_length = 512

    spec = make_spec(Limits(), "tiny", "shakespeare", 200, 4000, 64, 16, 5e-4, 300, 0.15, False, True)
    worker = TrainingWorker(tempfile.mkdtemp(prefix="first-step-runs-"))
    start = time.perf_counter()
    worker.start(spec)
    stages: dict[str, float] = {}
    stage, since = "starting", start
    while True:
        st = worker.status()
        now = time.perf_counter()
        name = st.message.split(":")[0].split(" (")[0] if st.state == "preparing" else "until step 1"
        if name != stage:
            stages[stage] = stages.get(stage, 0.0) + now - since
            stage, since = name, now
        if st.step >= 1 or not st.active:
            break
        time.sleep(POLL_S)
    stages[stage] = stages.get(stage, 0.0) + now - since
    total = now - start
    worker.stop(wait_s=60)
    return {"step1_s": total, "stages": stages, "load": os.getloadavg()[0], "state": str(st.state)}


def measure(cache: str) -> dict:
    """``one_run`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, __file__, "--one", cache], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def show(label: str, run: dict) -> None:
    stages = "; ".join(f"{name} {seconds:.2f}s" for name, seconds in run["stages"].items() if seconds >= 0.01)
    print(f"{label}: step 1 at {run['step1_s']:.2f}s (load {run['load']:.2f}) — {stages}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one)))
        return
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    cold, warm = [], []
    for index in range(args.repeats):
        cache = tempfile.mkdtemp(prefix="first-step-cache-")
        cold.append(measure(cache))                  # a fresh cache: count, vocabulary, tokens all made
        warm.append(measure(cache))                  # the reference: the same start, everything cached
        show(f"cold {index + 1}", cold[-1])
        show(f"warm {index + 1}", warm[-1])
    c = statistics.median(r["step1_s"] for r in cold)
    w = statistics.median(r["step1_s"] for r in warm)
    print(f"median step 1: cold {c:.2f}s, warm {w:.2f}s, cold/warm {c / w:.2f}x; goal cold <= {GOAL_S:.0f}s "
          f"({'met' if c <= GOAL_S else 'MISSED'}); load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
