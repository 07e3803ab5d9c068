"""Explorer at scale (issue 34): server time, payload and peak memory of /attention, /embeddings and
/neuron_view for a first call and for a layer/head change, at 20 and 512 tokens, on the default model and a
bert-large-sized one (24 layers x 16 heads, hidden 1024, random weights, the bundled vocabulary).

The app is built as ``app.create_app`` builds it and served on loopback in this process; every request is
plain HTTP on the browser queue's route (POST ``/gradio_api/call/<api>``, then GET the event's stream to its
end, as ``bench/ui_latency.py`` does, in one session as a page's requests are). Per request: wall seconds,
the response's bytes (what the browser receives), the process's peak RSS during it (``VmHWM``, reset before each request through
``/proc/self/clear_refs``) and the RSS still held after it. The reference is the app's ``/noop`` endpoint (same
queue and route, no work), measured in the same rounds: the table prints each request's seconds over the
no-op's. A first call uses a text not seen before (a cache miss); a layer/head change sends the same text
with another layer and head (the forward cache answers it: docs/design/forward-cache.md).

Usage: python bench/explorer_scale.py [--rounds 3] [--quick] [--threads T]
  --quick: one round, and at 512 tokens the large model only for /attention (about 1 minute; the default run,
  3 rounds, takes about 1.5 minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.ui_latency import bench_services, serve  # noqa: E402
from explorer.services import Services  # noqa: E402

WORDS = ("the", "cat", "sat", "on", "mat", "dog", "ran", "in", "park", "a", "big", "red", "house", "with",
         "blue", "door", "and", "old", "man", "saw")
LENGTHS = (20, 512)
SESSION = "explorer-scale-bench"      # one visitor, as one browser page is
LARGE = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)


def text_of(tokens: int, variant: int) -> str:
    """About ``tokens`` word pieces with the specials (one common word = one piece); ``variant`` makes it new."""
    return " ".join(WORDS[(7 * i + variant) % len(WORDS)] for i in range(tokens - 2))


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM); False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


@dataclass
class Sample:
    seconds: float
    nbytes: int
    peak_mb: float
    held_mb: float


def http_call(http: httpx.Client, base: str, api: str, data: list[Any]) -> int:
    """One call on the browser queue's route, in the bench's one session (a page keeps one, so the app's
    forward cache knows it): POST the inputs, read the event's stream to its end; its size in bytes."""
    event = http.post(f"{base}gradio_api/call{api}", json={"data": data, "session_hash": SESSION})
    event.raise_for_status()
    body = http.get(f"{base}gradio_api/call{api}/{event.json()['event_id']}").content
    if b"event: complete" not in body:
        raise RuntimeError(f"{api} did not complete: {body[:300]!r}")
    return len(body)


def measure(http: httpx.Client, base: str, api: str, data: list[Any]) -> Sample:
    """One request: its seconds, response bytes, the peak RSS during it and the RSS after it (MB)."""
    reset_peak()
    start = time.perf_counter()
    size = http_call(http, base, api, data)
    seconds = time.perf_counter() - start
    return Sample(seconds, size, _status_kb("VmHWM") / 1024, _status_kb("VmRSS") / 1024)


def requests_for(api: str, key: str, text: str, length: int, heads: int, layer: int) -> list[Any]:
    """The positional inputs of ``api`` for one text, layer (from 1) and head."""
    head = layer % heads
    if api == "/attention":
        return [key, text, "", layer, head, length, list(range(heads)), "entropy"]
    if api == "/embeddings":
        return [key, text, "", layer, "output", "all"]
    return [key, text, "", layer, head, length, 1]                                 # /neuron_view, query 1


def run_case(http: httpx.Client, base: str, api: str, key: str, shape: tuple[int, int], length: int,
             rounds: int) -> dict[str, list[Sample]]:
    """``rounds`` x (a first call on a new text, two layer/head changes on it, a no-op), interleaved."""
    layers, heads = shape
    found: dict[str, list[Sample]] = {"first": [], "change": [], "noop": []}
    for r in range(rounds):
        text = text_of(length, variant=r + 1000 * LENGTHS.index(length) + 17 * len(api))
        found["first"].append(measure(http, base, api, requests_for(api, key, text, length, heads, 1)))
        for layer in (2, min(3, layers)):
            found["change"].append(measure(http, base, api, requests_for(api, key, text, length, heads, layer)))
        found["noop"].append(measure(http, base, "/noop", ["x"]))
    return found


def summarise(found: dict[str, list[Sample]]) -> dict[str, float]:
    """Medians of seconds and KB, the largest peaks, the no-op's ms, the ratio change / no-op, the RSS after."""
    median = statistics.median
    noop = median(s.seconds for s in found["noop"])
    return {"first_s": median(s.seconds for s in found["first"]),
            "first_kb": median(s.nbytes for s in found["first"]) / 1e3,
            "first_peak": max(s.peak_mb for s in found["first"]),
            "change_s": median(s.seconds for s in found["change"]),
            "change_kb": median(s.nbytes for s in found["change"]) / 1e3,
            "change_peak": max(s.peak_mb for s in found["change"]), "noop_ms": noop * 1e3,
            "ratio": median(s.seconds for s in found["change"]) / noop,
            "held": found["noop"][-1].held_mb}


def report(rows: list[tuple[str, int, str, dict[str, float]]]) -> list[str]:
    """The table (medians; peaks are the largest seen) and the ratios layer change / no-op."""
    lines = ["| model | tokens | endpoint | first call | first KB | peak RSS MB | layer change | change KB | "
             "no-op | change / no-op | RSS after MB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, length, api, s in rows:
        lines.append(f"| {model} | {length} | `{api}` | {s['first_s']:.2f} s | {s['first_kb']:.0f} | "
                     f"{max(s['first_peak'], s['change_peak']):.0f} | {s['change_s'] * 1e3:.0f} ms | "
                     f"{s['change_kb']:.0f} | {s['noop_ms']:.1f} ms | {s['ratio']:.1f} | {s['held']:.0f} |")
    lines.append("ratio layer change / no-op: " + ", ".join(f"{m} {n} {a} {s['ratio']:.1f}" for m, n, a, s in rows))
    lines.append("ratio layer change / first call: " + ", ".join(
        f"{m} {n} {a} {s['change_s'] / s['first_s']:.3f}" for m, n, a, s in rows))
    return lines


def add_large(services: Services, heads: tuple[str, ...] = ("mlm", "nsp")) -> tuple[int, int]:
    """Pin a random bert-large-sized model with ``heads`` as ``large``; its (layers, heads)."""
    import torch

    from engine.model.loaded_model import LoadedModel
    from engine.model.config import BertConfig
    from engine.model.heads import BertWithHeads

    torch.manual_seed(0)
    config = BertConfig(vocab_size=services.tokenizer.vocab_size, **LARGE)
    model = BertWithHeads(config, heads=heads).eval()
    services.registry().pin("large", LoadedModel(model, services.tokenizer, config, "random bert-large shape"))
    return config.num_hidden_layers, config.num_attention_heads


def main() -> None:
    import torch

    import app
    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="first calls per case (default 3)")
    parser.add_argument("--quick", action="store_true", help="one round; large at 512 for /attention only")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds = 1 if args.quick else args.rounds
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; peak RSS reset per request: {reset_peak()}; {rounds} round(s)")
    rows = []
    with tempfile.TemporaryDirectory() as runs:
        services, described = bench_services(DEFAULT_MODEL_DIR, Path(runs))
        config = services.model("default").config
        models = {"default": (config.num_hidden_layers, config.num_attention_heads)}
        try:
            with serve(app.create_app(services)) as client:
                http = httpx.Client(timeout=600)
                measure(http, client.src, "/noop", ["x"])
                for key in ("default", "large"):
                    if key == "large":
                        models["large"] = add_large(services)
                    for length in LENGTHS:
                        for api in ("/attention", "/embeddings", "/neuron_view"):
                            if args.quick and key == "large" and length == 512 and api != "/attention":
                                continue
                            found = run_case(http, client.src, api, key, models[key], length, rounds)
                            rows.append((key, length, api, summarise(found)))
                            print(f"{key} {length} {api}: first {rows[-1][3]['first_s']:.2f} s, change "
                                  f"{rows[-1][3]['change_s'] * 1e3:.0f} ms", flush=True)
        finally:
            services.get_worker().close(timeout_s=60)
    print(f"default model: {described}; large: random weights, 24 x 1024, 16 heads")
    for line in report(rows):
        print(line)


if __name__ == "__main__":
    main()
