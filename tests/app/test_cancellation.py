"""Cancelled work stops, and heavy work cannot starve light work (issue 27).

The served app, with attribution made slow on purpose (one integration point per forward pass, 0.2 s each:
300 steps take a minute): three ``/attribute`` calls cancelled from ``gradio_client`` leave no engine work
running within seconds (``engine.cancellation.running()``), the two that waited never start, and
``/tokenize`` answers while heavy work runs and waits (before any of it ends: no clock). A client that goes
away (its event stream closed) stops its work the same way.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import pytest  # noqa: E402

from engine import cancellation  # noqa: E402
from engine.text.tokenizer import WordPieceTokenizer  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.app_helpers import serve, slowed_attribution  # noqa: E402
from support.probing_helpers import make_services  # noqa: E402

MASKED = "the cat [MASK] on the mat."
STEP_S = 0.2                 # one forward pass of the slowed attribution
STEPS = 300                  # 300 forward passes: a minute per call if nothing stops it
STOP_WITHIN_S = 30.0         # a generous bound for a loaded machine; done < STEPS is what shows it stopped
HEAVY = {"attribute", "neighbours_index", "compare", "compare_over_run", "attention_over_training",
         "embeddings_over_training", "fill_mask_over_training", "ablate_heads",
         "syntax_heads", "layer_probe", "syntax_over_training"}
ATTRIBUTE = dict(model_key="default", task="fill_mask", text=MASKED, steps=STEPS, api_name="/attribute")


@pytest.fixture
def forwards(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Slow attribution down (one point per batch, ``STEP_S`` each); the list counts its forward passes."""
    return slowed_attribution(monkeypatch, STEP_S)


@pytest.fixture
def services(tiny_tokenizer: WordPieceTokenizer) -> Services:
    return make_services(tiny_tokenizer)


def _wait(condition: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout_s``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, f"not within {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def served(services: Services, no_internet: list[str]) -> Iterator:
    import app

    assert cancellation.running() == 0
    with serve(app.create_app(services, {"EXPLORER_CONCURRENCY": "1"})) as client:     # the setting
        yield client
        _wait(lambda: cancellation.running() == 0, 90)     # nothing left behind for the next test


def test_the_heavy_endpoints_share_one_queue_group_of_their_own(services: Services) -> None:
    import app

    from explorer.serving import heavy_limits as heavy_limits

    demo = app.create_app(services)
    fns = demo.fns.values()
    heavy = {fn.api_name for fn in fns if fn.concurrency_id == "heavy" and fn.api_visibility == "public"}
    assert heavy == HEAVY
    assert {fn.concurrency_limit for fn in fns if fn.concurrency_id == "heavy"} == {None}    # they wait at the gate
    assert heavy_limits.gate_for(demo).limits.running == 1                                    # the default
    assert all(fn.concurrency_id != "heavy" for fn in fns if fn.api_name in ("tokenize", "fill_mask", "attention"))


def test_cancelled_heavy_calls_stop_and_light_calls_keep_answering(served, forwards: list[int]) -> None:
    jobs = [served.submit(**{**ATTRIBUTE, "steps": STEPS - n}) for n in range(3)]     # three requests, not one joined
    _wait(lambda: forwards[0] >= 2, 30)                     # the first one computes
    assert cancellation.running() == 1                      # heavy work runs one at a time; two wait
    html, summary, table, plot = served.predict("default", "the cat sat", "", 32, api_name="/tokenize")
    assert "cat" in html                                    # answered while the heavy three still run and wait:
    assert cancellation.running() == 1 and not any(job.done() for job in jobs)     # not queued behind them
    for job in jobs:
        job.cancel()
    stopped_in = _wait(lambda: cancellation.running() == 0, STOP_WITHIN_S)
    done = forwards[0]
    time.sleep(1.0)
    assert forwards[0] == done, "work went on after its request was cancelled"
    assert cancellation.running() == 0 and done < STEPS, (done, stopped_in)   # the waiting two never started
    assert served.predict("default", "the cat sat", "", 32, api_name="/tokenize")[0]    # the app still serves


def test_a_client_that_goes_away_stops_its_work(served, forwards: list[int]) -> None:
    config = served.config
    fn_index = next(i for i, d in enumerate(config["dependencies"]) if d.get("api_name") == "attribute")
    base = served.src.rstrip("/") + "/" + config.get("api_prefix", "").strip("/")
    session = uuid.uuid4().hex
    data = ["default", "fill_mask", MASKED, "", "", 0, "integrated_gradients", "logit", STEPS]
    with httpx.Client(timeout=30) as http:
        joined = http.post(f"{base}/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": session,
                                                       "event_data": None, "trigger_id": None})
        assert joined.status_code == 200, joined.text
        with http.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
            lines = stream.iter_lines()                     # kept open (a closed generator would hang up now)
            while not ((line := next(lines)).startswith("data:") and json.loads(line[5:])["msg"] == "process_starts"):
                pass
            _wait(lambda: forwards[0] >= 2, 30)             # the work runs while the client listens
            assert cancellation.running() == 1
        # the client has hung up
    _wait(lambda: cancellation.running() == 0, STOP_WITHIN_S)
    done = forwards[0]
    time.sleep(1.0)
    assert forwards[0] == done < STEPS
