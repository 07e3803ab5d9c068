"""UI latency: each probing endpoint through plain HTTP and through gradio_client, idle and while training.

The app is built as ``app.create_app`` builds it (same queue settings) and served on
loopback in this process; one client calls /tokenize, /fill_mask, /answer, /attention
and /embeddings in turn (interleaved, so drift slows every endpoint alike), first with
no training run ("idle"), then while a pretraining run goes on in the background, then
idle again after stopping it. Idle figures pool the two idle blocks, which bracket the
training block, so a machine whose speed drifts biases the ratio less.

Two ways in, interleaved in every round: plain HTTP on the route the browser's queue uses
(POST ``/gradio_api/call/<api>``, then GET the event's stream until ``complete``), and
``gradio_client``. Beside the endpoints, HTTP times the app's ``/noop`` endpoint (same queue and
route, no work): the reference for "how much of a request is the endpoint's own work".

Printed per endpoint: HTTP p50 / p90 idle, the ratio p50 endpoint / p50 no-op (goal, issue 15:
<= 2 idle), p50 during training and its ratio to idle (goal <= 2), and the response size in bytes;
then the gradio_client table (goals, issue 6: p50 <= 100 ms idle; during training <= 2x idle).

Model: ``assets/default-model`` (or ``--model`` pointing to a Hugging Face folder). When
it is missing, a random-weight model of the same shape is used, with a message saying so.

Usage: python bench/ui_latency.py [--model DIR] [--requests 30] [--warmup 3] [--threads T]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
import httpx  # noqa: E402
from gradio_client import Client  # noqa: E402

from engine.training.worker.training_worker import TrainingWorker  # noqa: E402
from explorer.services import Services  # noqa: E402

GOAL_IDLE_P50_MS = 100.0
GOAL_TRAINING_RATIO = 2.0
GOAL_NOOP_RATIO = 2.0
START_TIMEOUT_S = 300.0
# The Training tab's defaults (what a user presses Start on), with steps enough to outlast the bench.
# preset, corpus, max documents, vocab, seq length, batch, lr, steps, mask rate, whole word, nsp
TRAINING = ["tiny", "shakespeare", 200, 4000, 64, 16, 5e-4, 1_000_000, 0.15, False, True]
FILL_TEXT = "The capital of France is [MASK]."
QUESTION = "Where is the Eiffel Tower?"
CONTEXT = "The Eiffel Tower is a wrought-iron tower in Paris, built for the 1889 World's Fair."
TEXT, PAIR = "The cat sat on the mat.", "The dog barked at the cat."
NEEDS_HEAD = {"/fill_mask": "mlm", "/answer": "qa"}  # endpoints timed only when the model has the head


@contextlib.contextmanager
def serve(demo: gr.Blocks) -> Iterator[Client]:
    """Launch ``demo`` on a free loopback port without blocking; a client for it; close it afterwards."""
    import explorer.page

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                theme=explorer.page.THEME, css=explorer.page.CSS)
    try:
        yield Client(demo.local_url, verbose=False)
    finally:
        demo.close()


def endpoint_calls(max_length: int = 128, max_seq_len: int = 384,
                   doc_stride: int = 128) -> dict[str, Callable[[Client], Any]]:
    """One call per probing endpoint, each with a typical short input, on the ``default`` model
    (``max_length``: tokenize/attention; ``max_seq_len``, ``doc_stride``: QA windows)."""
    return {
        "/tokenize": lambda c: c.predict("default", TEXT, PAIR, max_length, api_name="/tokenize"),
        "/fill_mask": lambda c: c.predict("default", FILL_TEXT, 5, "", api_name="/fill_mask"),
        "/answer": lambda c: c.predict("default", QUESTION, CONTEXT, 1, 15, max_seq_len, doc_stride, False,
                                       api_name="/answer"),
        "/attention": lambda c: c.predict("default", TEXT, PAIR, 1, 2, max_length, [0, 1, 2, 3], "entropy",
                                          api_name="/attention"),
        "/embeddings": lambda c: c.predict("default", TEXT, PAIR, 1, "output", "all", api_name="/embeddings"),
    }


def endpoint_inputs(max_length: int = 128, max_seq_len: int = 384, doc_stride: int = 128) -> dict[str, list[Any]]:
    """The same calls as ``endpoint_calls``, as the positional data the HTTP route takes (and /noop)."""
    return {
        "/noop": ["x"],
        "/tokenize": ["default", TEXT, PAIR, max_length],
        "/fill_mask": ["default", FILL_TEXT, 5, ""],
        "/answer": ["default", QUESTION, CONTEXT, 1, 15, max_seq_len, doc_stride, False],
        "/attention": ["default", TEXT, PAIR, 1, 2, max_length, [0, 1, 2, 3], "entropy"],
        "/embeddings": ["default", TEXT, PAIR, 1, "output", "all"],
    }


def http_call(http: httpx.Client, base: str, api: str, data: list[Any]) -> int:
    """One call on the browser queue's route: POST the inputs, read the event's stream to its end; its size."""
    event = http.post(f"{base}gradio_api/call{api}", json={"data": data})
    event.raise_for_status()
    body = http.get(f"{base}gradio_api/call{api}/{event.json()['event_id']}").content
    if b"event: complete" not in body:
        raise RuntimeError(f"{api} did not complete: {body[:300]!r}")
    return len(body)


def http_calls(base: str, inputs: dict[str, list[Any]], sizes: dict[str, int]) -> dict[str, Callable[[Any], Any]]:
    """One plain-HTTP call per endpoint (named ``http <api>``), recording each response's size in ``sizes``."""
    http = httpx.Client(timeout=120)

    def call(api: str, data: list[Any]) -> Callable[[Any], Any]:
        def run(_client: Any) -> None:
            sizes[api] = http_call(http, base, api, data)
        return run
    return {f"http {api}": call(api, data) for api, data in inputs.items()}


@dataclass
class Latency:
    """One endpoint's seconds per call, idle and during training."""

    idle: list[float]
    training: list[float]

    @staticmethod
    def percentile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]

    def p50(self, phase: str) -> float:
        return statistics.median(getattr(self, phase))

    def p95(self, phase: str) -> float:
        return self.percentile(getattr(self, phase), 0.95)

    def p90(self, phase: str) -> float:
        return self.percentile(getattr(self, phase), 0.90)

    @property
    def ratio(self) -> float:
        """p50 during training / p50 idle."""
        return self.p50("training") / self.p50("idle")


def time_rounds(client: Client, calls: dict[str, Callable[[Client], Any]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of every endpoint, ``rounds`` times, endpoints interleaved."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call(client)
            times[name].append(time.perf_counter() - start)
    return times


def start_training(client: Client, worker: TrainingWorker, settings: list[Any]) -> float:
    """Start a run through /train_start and wait until it has taken a step; seconds that took."""
    start = time.perf_counter()
    client.predict(*settings, api_name="/train_start")
    while True:
        st = worker.status()
        if st.state == "running" and st.step >= 1:
            return time.perf_counter() - start
        if st.state not in ("preparing", "running"):
            raise RuntimeError(f"the training run did not start: {st.state}: {st.message}")
        if time.perf_counter() - start > START_TIMEOUT_S:
            raise TimeoutError(f"the training run took no step in {START_TIMEOUT_S:.0f} s")
        time.sleep(0.2)


def run(services: Services, requests: int, warmup: int = 2, training: list[Any] | None = None,
        max_length: int = 128, max_seq_len: int = 384,
        doc_stride: int = 128) -> tuple[dict[str, Latency], dict[str, Any]]:
    """Serve the app on loopback and time every endpoint idle / during training / idle again.

    Returns the latencies per endpoint and facts about the run (training steps taken meanwhile).
    """
    import app

    worker = services.get_worker()
    heads = set(services.model("default").model.heads)
    calls = {name: call for name, call in endpoint_calls(max_length, max_seq_len, doc_stride).items()
             if NEEDS_HEAD.get(name, "") in heads | {""}}
    skipped = [f"{name} (the model has no {NEEDS_HEAD[name]} head)" for name in NEEDS_HEAD if name not in calls]
    inputs = {name: data for name, data in endpoint_inputs(max_length, max_seq_len, doc_stride).items()
              if name == "/noop" or name in calls}
    sizes: dict[str, int] = {}
    half = max(1, requests // 2)
    with serve(app.create_app(services)) as client:
        calls = {**http_calls(client.src, inputs, sizes), **calls}
        time_rounds(client, calls, warmup)
        idle_before = time_rounds(client, calls, half)
        startup_s = start_training(client, worker, training or TRAINING)
        time_rounds(client, calls, 1)  # the first requests after a run starts copy the live model etc.
        step_before = worker.status().step
        during = time_rounds(client, calls, requests)
        status = worker.status()
        client.predict(api_name="/train_stop")
        worker.join(timeout_s=120)
        idle_after = time_rounds(client, calls, max(1, requests - half))
    latencies = {name: Latency(idle_before[name] + idle_after[name], during[name]) for name in calls}
    facts = {"steps_during": status.step - step_before, "state_during": status.state, "startup_s": startup_s,
             "skipped": skipped, "sizes": sizes}
    return latencies, facts


def http_report(latencies: dict[str, Latency], sizes: dict[str, int]) -> list[str]:
    """The plain-HTTP table: per endpoint p50/p90 idle, ratio to /noop, p50 training, ratio to idle, bytes."""
    noop = latencies["http /noop"].p50("idle")
    lines = ["plain HTTP (/gradio_api/call/...; ratio = p50 / p50 of /noop in the same run):",
             f"{'endpoint':12s} {'idle p50':>9s} {'idle p90':>9s} {'/noop':>6s} {'train p50':>10s} "
             f"{'/idle':>6s} {'bytes':>9s}"]
    rows = {name[5:]: lat for name, lat in latencies.items() if name.startswith("http ")}
    for name, lat in rows.items():
        lines.append(f"{name:12s} {1e3 * lat.p50('idle'):7.1f}ms {1e3 * lat.p90('idle'):7.1f}ms "
                     f"{lat.p50('idle') / noop:6.2f} {1e3 * lat.p50('training'):8.1f}ms {lat.ratio:6.2f} "
                     f"{sizes.get(name, 0):9,d}")
    probing = {n: lat for n, lat in rows.items() if n != "/noop"}
    worst = max(lat.p50("idle") / noop for lat in probing.values())
    worst_training = max(lat.ratio for lat in probing.values())
    lines.append(f"goals: endpoint/noop p50 <= {GOAL_NOOP_RATIO:.0f} idle (worst {worst:.2f}: "
                 f"{'met' if worst <= GOAL_NOOP_RATIO else 'NOT met'}); training/idle <= {GOAL_TRAINING_RATIO:.0f} "
                 f"(worst {worst_training:.2f}: {'met' if worst_training <= GOAL_TRAINING_RATIO else 'NOT met'})")
    return lines


def report(latencies: dict[str, Latency], facts: dict[str, Any]) -> list[str]:
    """The lines to print: the plain-HTTP table, then a row per endpoint through gradio_client and the ratios."""
    lines = http_report(latencies, facts.get("sizes", {})) if "http /noop" in latencies else []
    latencies = {name: lat for name, lat in latencies.items() if not name.startswith("http ")}
    lines.append("through gradio_client:")
    lines.append(f"{'endpoint':12s} {'idle p50':>9s} {'idle p95':>9s} {'train p50':>10s} {'train p95':>10s} {'ratio':>6s}")
    for name, lat in latencies.items():
        lines.append(f"{name:12s} {1e3 * lat.p50('idle'):7.1f}ms {1e3 * lat.p95('idle'):7.1f}ms "
                     f"{1e3 * lat.p50('training'):8.1f}ms {1e3 * lat.p95('training'):8.1f}ms {lat.ratio:6.2f}")
    worst_idle = max(lat.p50("idle") for lat in latencies.values()) * 1e3
    worst_ratio = max(lat.ratio for lat in latencies.values())
    if facts.get("skipped"):
        lines.append("not timed: " + ", ".join(facts["skipped"]))
    lines.append(f"training meanwhile: {facts['steps_during']} steps ({facts['state_during']}); "
                 f"run took {facts['startup_s']:.1f} s to its first step")
    lines.append(f"goals: idle p50 <= {GOAL_IDLE_P50_MS:.0f} ms (worst {worst_idle:.1f} ms: "
                 f"{'met' if worst_idle <= GOAL_IDLE_P50_MS else 'NOT met'}); during/idle <= {GOAL_TRAINING_RATIO:.0f} "
                 f"(worst {worst_ratio:.2f}: {'met' if worst_ratio <= GOAL_TRAINING_RATIO else 'NOT met'})")
    lines.append("ratio p50 training/idle: " + ", ".join(f"{n} {lat.ratio:.2f}" for n, lat in latencies.items()))
    return lines


def bench_services(model_dir: Path, runs_root: Path) -> tuple[Services, str]:
    """Services serving ``model_dir`` as ``default`` (a random-weight stand-in when it is missing)."""
    from engine.model.loaded_model import LoadedModel
    from engine.model.config import BertConfig
    from engine.model.heads import BertWithHeads
    from explorer.models.registry import ModelRegistry
    from engine.text.tokenizer import WordPieceTokenizer
    from explorer.services import DEFAULT_TOKENIZER_DIR

    tokenizer = WordPieceTokenizer.from_file(DEFAULT_TOKENIZER_DIR)
    worker = TrainingWorker(runs_root=runs_root)
    if (model_dir / "config.json").is_file():
        registry = ModelRegistry(runs_root=runs_root, worker=worker, default_dir=model_dir)
        registry.get("default")  # load now: the first request should not pay for it
        described = str(model_dir)
    else:
        print(f"NOTE: no model at {model_dir} (config.json missing); timing a random-weight stand-in of the "
              "bundled model's shape (6 x 384, 12 heads, MLM/NSP/QA heads). Latency depends on the shape, "
              "not the weights, but these are not the bundled model's figures.")
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=384, num_hidden_layers=6,
                            num_attention_heads=12, intermediate_size=1536)
        model = BertWithHeads(config, heads=("mlm", "nsp", "qa")).eval()
        registry = ModelRegistry(runs_root=runs_root, worker=worker, default_dir=None)
        registry.pin("default", LoadedModel(model, tokenizer, config, "random stand-in"))
        described = "random-weight stand-in (6 x 384)"
    return Services(tokenizer=tokenizer, worker=worker, models=registry), described


def main() -> None:
    import torch

    from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="a Hugging Face model folder")
    parser.add_argument("--requests", type=int, default=30, help="timed calls per endpoint and phase (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per endpoint first (default 3)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as runs:
        services, described = bench_services(args.model, Path(runs))
        print(f"model {described}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
              f"{os.cpu_count()} CPUs; {args.requests} calls per endpoint and phase")
        try:
            latencies, facts = run(services, args.requests, args.warmup)
        finally:
            services.get_worker().close(timeout_s=60)
    for line in report(latencies, facts):
        print(line)


if __name__ == "__main__":
    main()
