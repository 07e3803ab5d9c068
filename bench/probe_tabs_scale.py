"""Fill-mask, QA and Why at scale (issue 34, item 4): server seconds and response bytes of a first call and of
each option change that leaves the model's input as it was, at 20 and 512 tokens, on the default model and a
bert-large-sized one (24 layers x 16 heads, hidden 1024, random weights with MLM, NSP and QA heads).

The app is built as ``app.create_app`` builds it and served on loopback in this process; every request is
plain HTTP in one session, as a page's requests are: a public endpoint on ``/gradio_api/call/<api>``, a private
one (Fill-mask's *Zoom*) on the page's own route, ``/gradio_api/queue/join`` with its ``fn_index``. The reference
is the app's ``/noop`` (same queue and route, no work), measured in the same rounds. Cases:

* ``/fill_mask``: a new text with one [MASK] (first), then *Top-k* 5 -> 10 on the same text (an option change:
  the per-input cache answers it), then *Zoom* (``fill_mask_zoom``: redraws the chart the page holds; its
  request carries that chart, so the bytes both ways are printed).
* ``/answer``: a new context (20 tokens: one window; 512: four windows of 256 tokens, doc stride 128), then *Top-k*
  1 -> 3, *Max answer length* 15 -> 30 and *Allow no answer* on the same question and context (each reads the
  kept windows' logits).
* ``/attribute`` (Why): a new text, then the same request again (a tab switch and back, an example clicked
  twice): the kept attribution answers it. A method, score, target or steps change is a new computation (other
  gradients), so it is not a view change. At 512 tokens the large model uses gradient x input (one backward);
  integrated gradients there take minutes on 2 cores.

Usage: python bench/probe_tabs_scale.py [--rounds 2] [--quick]  (--quick: one round, no large model at 512)
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
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.explorer_scale import add_large, text_of  # noqa: E402
from bench.ui_latency import bench_services, serve  # noqa: E402

LENGTHS = (20, 512)
SESSION = "probe-tabs-scale-bench"
QUESTION = "Where did the old man see the red door?"
WINDOW = (256, 128)             # QA's max sequence length and doc stride: 512 tokens make 4 windows


class Caller:
    """Requests in one session; public endpoints by name, private ones by their ``fn_index``."""

    def __init__(self, base: str, demo: Any) -> None:
        self.base, self.http = base, httpx.Client(timeout=900)
        self.index = {fn.api_name: i for i, fn in demo.fns.items() if fn.api_name}

    def call(self, api: str, data: list[Any]) -> tuple[float, int, int, Any]:
        """(seconds, response bytes, request bytes, output data) of one call."""
        name = api.lstrip("/")
        body = {"data": data, "session_hash": SESSION}
        sent = len(json.dumps(body))
        start = time.perf_counter()
        if name in ("noop", "fill_mask", "answer", "attribute"):
            event = self.http.post(f"{self.base}gradio_api/call/{name}", json=body)
            event.raise_for_status()
            raw = self.http.get(f"{self.base}gradio_api/call/{name}/{event.json()['event_id']}").content
            seconds = time.perf_counter() - start
            if b"event: complete" not in raw:
                raise RuntimeError(f"{api} did not complete: {raw[:300]!r}")
            line = raw.split(b"event: complete\ndata: ", 1)[1].split(b"\n", 1)[0]
            return seconds, len(raw), sent, json.loads(line)
        joined = self.http.post(f"{self.base}gradio_api/queue/join",
                                json={**body, "fn_index": self.index[name], "trigger_id": None})
        joined.raise_for_status()
        size = 0
        with self.http.stream("GET", f"{self.base}gradio_api/queue/data", params={"session_hash": SESSION}) as s:
            for line in s.iter_lines():
                size += len(line) + 1
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("msg") == "process_completed":
                    if not message.get("success"):
                        raise RuntimeError(f"{api} failed: {message.get('output')}")
                    return time.perf_counter() - start, size, sent, message["output"]["data"]
        raise RuntimeError(f"{api} never completed")


def masked(tokens: int, variant: int) -> str:
    """About ``tokens`` pieces with one [MASK] in the middle."""
    words = text_of(tokens - 1, variant).split()
    return " ".join(words[:len(words) // 2] + ["[MASK]"] + words[len(words) // 2:])


def cases(key: str, length: int, variant: int) -> list[tuple[str, str, list[Any] | None]]:
    """(case, api, inputs) in order: each tab's first call, then its option changes (None: built from the
    previous output)."""
    fill = masked(length, variant)
    context = text_of(length, variant + 1) + "."
    method = "gradient_x_input" if key == "large" and length > 100 else "integrated_gradients"
    why = [key, "fill_mask", masked(length, variant + 2), "", "", 0, method, "logit", 50]
    qa = [key, QUESTION, context, 1, 15, *WINDOW, False]
    return [("fill first", "/fill_mask", [key, fill, 5, ""]),
            ("fill top-k 10", "/fill_mask", [key, fill, 10, ""]),
            ("fill zoom", "/fill_mask_zoom", None),
            ("qa first", "/answer", qa),
            ("qa top-k 3", "/answer", [*qa[:3], 3, *qa[4:]]),
            ("qa max answer 30", "/answer", [*qa[:4], 30, *qa[5:]]),
            ("qa allow no answer", "/answer", [*qa[:7], True]),
            ("why first", "/attribute", why),
            ("why again", "/attribute", why),
            *[("noop", "/noop", ["x"])] * 3]


def run_model(caller: Caller, key: str, rounds: int, lengths: tuple[int, ...]) -> list[tuple[str, int, str,
                                                                                             list[tuple]]]:
    """Every case at every length, ``rounds`` times (new texts each round)."""
    rows = []
    for length in lengths:
        found: dict[str, list[tuple]] = {}
        for r in range(rounds):
            plot = None
            for case, api, data in cases(key, length, variant=3 * r + 1 + 10 * LENGTHS.index(length)):
                if data is None:
                    data = [plot, True]
                seconds, got, sent, output = caller.call(api, data)
                if case == "fill first":
                    plot = output[0]
                found.setdefault(case, []).append((seconds, got, sent))
            print(f"{key} {length} round {r + 1}: " + ", ".join(f"{c} {v[-1][0]:.2f} s" for c, v in found.items()),
                  flush=True)
        rows += [(key, length, case, samples) for case, samples in found.items()]
    return rows


def report(rows: list[tuple[str, int, str, list[tuple]]]) -> list[str]:
    """The table (medians) with each change's seconds over its tab's first call and over the no-op."""
    median = statistics.median
    noop = {(m, n): median(s[0] for s in v) for m, n, c, v in rows if c == "noop"}
    first = {(m, n, c.split()[0]): median(s[0] for s in v) for m, n, c, v in rows if c.endswith("first")}
    lines = ["| model | tokens | case | server s | response KB | request KB | / first call | / no-op |",
             "|---|---|---|---|---|---|---|---|"]
    for m, n, c, v in rows:
        seconds = median(s[0] for s in v)
        ref = first.get((m, n, c.split()[0]))
        lines.append(f"| {m} | {n} | {c} | {seconds:.3f} | {median(s[1] for s in v) / 1e3:.1f} | "
                     f"{median(s[2] for s in v) / 1e3:.1f} | {seconds / ref:.3f} | {seconds / noop[(m, n)]:.1f} |"
                     if ref and c != "noop" else
                     f"| {m} | {n} | {c} | {seconds:.3f} | {median(s[1] for s in v) / 1e3:.1f} | "
                     f"{median(s[2] for s in v) / 1e3:.1f} | – | 1.0 |")
    return lines



def main() -> None:
    import torch

    import app
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per model and length (default 2)")
    parser.add_argument("--quick", action="store_true", help="one round; the large model at 20 tokens only")
    parser.add_argument("--models", default="default,large", help="comma-separated: default, large")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; {rounds} round(s)")
    rows = []
    with tempfile.TemporaryDirectory() as runs:
        services, described = bench_services(DEFAULT_MODEL_DIR, Path(runs))
        try:
            demo = app.create_app(services)
            with serve(demo) as client:
                caller = Caller(client.src, demo)
                caller.call("/noop", ["x"])
                for key in args.models.split(","):
                    if key == "large":
                        add_large(services, ("mlm", "nsp", "qa"))
                    lengths = (20,) if args.quick and key == "large" else LENGTHS
                    rows += run_model(caller, key, rounds, lengths)
        finally:
            services.get_worker().close(timeout_s=60)
    print(f"default model: {described}; large: random weights, 24 x 1024, 16 heads")
    for line in report(rows):
        print(line)


if __name__ == "__main__":
    main()
