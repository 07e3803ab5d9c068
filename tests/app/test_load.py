"""Load: N concurrent gradio_client clients call /fill_mask, /answer and /attention in a loop
while a training run goes on. Loopback only, bounded in time (EXPLORER_LOAD_SECONDS, default
20 s; the issue's full run is 60) and in clients (EXPLORER_LOAD_CLIENTS, default 20).

Asserts zero errors, well-formed responses and training progress meanwhile; latency is
printed (p50/p95 per endpoint; ``pytest -s`` shows it), never asserted.
"""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
from gradio_client import Client  # noqa: E402

from support.app_helpers import serve  # noqa: E402
from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from engine.training.worker.training_worker import TrainingWorker  # noqa: E402
from explorer.attention import sections as attention_sections  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.probing_helpers import make_services  # noqa: E402

SECONDS = float(os.environ.get("EXPLORER_LOAD_SECONDS", "20"))
CLIENTS = int(os.environ.get("EXPLORER_LOAD_CLIENTS", "20"))
TOP_K = 3
START_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 60.0
MAX_REQUESTS_PER_CLIENT = 2_000  # bounded in requests too, whatever the machine's speed
# preset, corpus, max documents, vocab, seq length, batch, lr, steps, mask rate, whole word, nsp
TRAINING = ["tiny", "shakespeare", 30, 300, 32, 8, 5e-4, 1_000_000, 0.15, False, True]
FILL_TEXT = "the cat [MASK] on the mat."
QUESTION, CONTEXT = "who sang?", "the bird sang in the tree and the dog ran to the house."
ATTN_TEXT, ATTN_PAIR = "the cat sat on the mat", "the dog ran"


def _fill_mask(client: Client) -> None:
    plot, results, filled, summary, _ = client.predict("default", FILL_TEXT, TOP_K, "", api_name="/fill_mask")
    assert plot["type"] == "plotly" and isinstance(summary, str) and filled
    assert len(results) == TOP_K and all({"token", "token_str", "score", "sequence"} <= set(r) for r in results)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)


def _answer(client: Client) -> None:
    highlights, answers, table, probs, windows, summary = client.predict(
        "default", QUESTION, CONTEXT, TOP_K, 15, 64, 16, False, api_name="/answer")
    assert len(answers) == TOP_K and all({"score", "start", "end", "answer"} <= set(a) for a in answers)
    assert all(CONTEXT[a["start"]:a["end"]] == a["answer"] for a in answers)
    assert len(table["data"]) == TOP_K and "".join(h["token"] for h in highlights) == CONTEXT
    assert probs["type"] == "plotly" and windows["type"] == "plotly" and isinstance(summary, str)


def _attention(client: Client) -> None:
    heat, head_view, model_view, stats_plot, table, summary = client.predict(
        "default", ATTN_TEXT, ATTN_PAIR, 1, 2, 128, [0, 1, 2, 3], "entropy", api_name="/attention")
    assert stats_plot["type"] == "plotly" and "maps" in heat and "grid" in model_view   # the views: arrays
    assert table["headers"] == attention_sections.TABLE_COLUMNS and len(table["data"]) == 8  # 2 layers x 4 heads
    assert "Layer 1, head 2" in summary


CALLS: dict[str, Callable[[Client], None]] = {"/fill_mask": _fill_mask, "/answer": _answer, "/attention": _attention}


@pytest.fixture(scope="module")
def services(tiny_tokenizer: WordPieceTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    svc = make_services(tiny_tokenizer)
    svc.worker = TrainingWorker(runs_root=tmp_path_factory.mktemp("runs"))
    yield svc
    svc.worker.close(timeout_s=30)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _connect(url: str, clients: list[Client | None], index: int, errors: list[str], lock: threading.Lock) -> None:
    """Open client ``index`` (a generous HTTP timeout: 20 clients fetch the app's API description at once)."""
    try:
        clients[index] = Client(url, verbose=False, httpx_kwargs={"timeout": CONNECT_TIMEOUT_S})
    except Exception as exc:  # noqa: BLE001 - every failure is a counted error
        with lock:
            errors.append(f"connect: {type(exc).__name__}: {exc}")


def _hammer(client: Client, offset: int, deadline: float, latencies: dict[str, list[float]],
            errors: list[str], lock: threading.Lock) -> None:
    """One client: call the endpoints in turn (starting at ``offset``) until ``deadline`` (or the request cap)."""
    names = list(CALLS)
    for index in range(offset, offset + MAX_REQUESTS_PER_CLIENT):
        if time.monotonic() >= deadline:
            break
        name = names[index % len(names)]
        start = time.perf_counter()
        try:
            CALLS[name](client)
        except Exception as exc:  # noqa: BLE001
            with lock:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        with lock:
            latencies[name].append(time.perf_counter() - start)


def _in_threads(target: Callable[..., None], args: list[tuple[Any, ...]], timeout_s: float) -> list[threading.Thread]:
    """Run ``target(*a)`` for every ``a`` in its own thread; wait for all (at most ``timeout_s`` each)."""
    threads = [threading.Thread(target=target, args=a, name=f"load-{i}") for i, a in enumerate(args)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    return threads


def _wait_training(worker: TrainingWorker) -> int:
    """Wait until the run has taken a step; its step."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        st = worker.status()
        if st.state == "running" and st.step >= 1:
            return st.step
        assert st.state in ("preparing", "running"), f"training did not start: {st.state} {st.message}"
        assert time.monotonic() < deadline, f"training took no step in {START_TIMEOUT_S:.0f} s: {st.message}"
        time.sleep(0.2)


def test_concurrent_clients_while_training(services: Services, no_internet: list[str]) -> None:
    import app

    assert app.QUEUE_MAX_SIZE >= CLIENTS  # every client may have one request queued at once
    worker = services.worker
    assert worker is not None
    with serve(app.create_app(services)) as control:
        assert "step" in control.predict(*TRAINING, api_name="/train_start")
        _wait_training(worker)
        latencies: dict[str, list[float]] = defaultdict(list)
        errors: list[str] = []
        lock = threading.Lock()
        clients: list[Client | None] = [None] * CLIENTS
        connecting = time.monotonic()
        _in_threads(_connect, [(control.src, clients, i, errors, lock) for i in range(CLIENTS)], CONNECT_TIMEOUT_S + 30)
        connect_s = time.monotonic() - connecting
        step_before = worker.status().step
        started = time.monotonic()
        threads = _in_threads(_hammer, [(c, i, started + SECONDS, latencies, errors, lock)
                                        for i, c in enumerate(clients) if c is not None], SECONDS + 120)
        elapsed = time.monotonic() - started
        status = worker.status()
        step_after = status.step
        stopped = control.predict(api_name="/train_stop")
        for client in clients:
            if client is not None:
                client.close()

    served = sum(len(v) for v in latencies.values())
    print(f"\nload: {CLIENTS} clients (connected in {connect_s:.1f} s) for {elapsed:.1f} s while training: "
          f"{served} requests served, {len(errors)} errors, "
          f"training steps {step_before} -> {step_after} ({status.state})")
    for name in CALLS:
        values = latencies.get(name, [])
        if values:
            print(f"  {name:12s} n={len(values):5d}  p50 {1e3 * statistics.median(values):8.1f} ms  "
                  f"p95 {1e3 * _percentile(values, 0.95):8.1f} ms")
    assert not any(t.is_alive() for t in threads), "a client did not finish"
    assert errors == [], f"{len(errors)} errors, first: {errors[:3]}"
    assert all(latencies.get(name) for name in CALLS), {n: len(v) for n, v in latencies.items()}
    assert status.state == "running", f"the run did not keep running under load: {status.state} {status.message}"
    assert step_after > step_before, "training made no progress while the clients were served"
    assert stopped.startswith(("**stopping**", "**stopped**", "**finished**")), stopped
    assert worker.join(timeout_s=60)
    assert no_internet == []  # loopback only
