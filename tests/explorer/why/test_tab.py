"""Why tab: the handler's outputs equal ``engine.probes.attribution.methods`` on the same model, bad input and a model
without the head are one clear sentence, the served ``/attribute`` gives the same numbers to ``gradio_client``, and
an example's click followed by *Explain* on the same form runs one explanation."""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import gradio as gr
import httpx
import pytest
from gradio_client import Client

from support.app_helpers import serve
from engine.probes.attribution.methods import attribute
from engine.probes.attribution.targets import NoSuchIndex
from explorer.formatting import plain_markdown
from explorer.serving import heavy_limits, in_flight
from explorer.ui_errors import friendly_errors
from explorer.why import actions, tab
from explorer.why.token_html import attribution_html
from support.heads_helpers import head_services
from support.probing_helpers import small_app
from support.registry_checks import check_attribution_targets

pytestmark = pytest.mark.usefixtures("one_thread")

MASKED = "the cat [MASK] on the mat."


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return head_services(tiny_tokenizer)


@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
def test_outputs_equal_the_engine(services, method) -> None:
    summary, page, bars, numbers = actions.explain_prediction(services, "default", "fill_mask", MASKED, "", "dog", 1,
                                                              method, "probability", 12)
    expected = attribute(services.model("default"), "fill_mask", MASKED, target="dog", which=0, method=method,
                         n_steps=12, score="probability")
    assert numbers == expected.as_dict()
    assert page == attribution_html(expected.tokens, expected.attributions, expected.target_position,
                                    percent_points=True)                # shares of a probability
    assert sorted(bars.data[0].x, key=abs, reverse=True) == list(bars.data[0].x)
    assert summary.startswith("**Why " + plain_markdown("'dog' at [MASK] (position 3)") + "?** Explaining its **probability**")
    if method == "integrated_gradients":
        assert "convergence delta" in summary and "12 steps" in summary and plain_markdown("[PAD] for every token") in summary
    else:
        assert "No baseline" in summary


def test_every_head_answers_through_the_form(services) -> None:
    for key, task, text, pair in [("default", "qa_end", "who sat?", "the cat sat on the mat."),
                                  ("default", "next_sentence", "the cat sat.", "it ran."),
                                  ("classifier", "classify", "the dog sat.", ""),
                                  ("tagger", "tag", "walter sat in paris.", ""),
                                  ("chooser", "choose", "the cat sat.", "it ran.\nthe car.\n\n")]:
        summary, _, _, numbers = actions.explain_prediction(services, key, task, text, pair, "", 0,
                                                            "gradient_x_input", "logit", 2)
        assert numbers["task"] == task and len(numbers["attributions"]) == len(numbers["tokens"]), task


def test_the_summary_flags_a_large_delta(services) -> None:
    summary, *_ = actions.explain_prediction(services, "default", "fill_mask", MASKED, steps=2)
    found = attribute(services.model("default"), "fill_mask", MASKED, n_steps=2)
    large = abs(found.convergence_delta) > 0.01 * abs(found.target_score - found.baseline_score)
    assert ("raise the steps" in summary) == large


@pytest.mark.parametrize("task,text,pair,changes,match", [
    ("fill_mask", "", "", {}, "Type the text with \\[mask\\]"),
    ("qa_start", "who sat?", " ", {}, "Type the context"),
    ("choose", "the cat sat.", "", {}, "Type the choices"),
    ("summarise", MASKED, "", {}, "Unknown prediction 'summarise'"),
    ("fill_mask", MASKED, "", {"steps": 1}, "Steps must be a whole number from 2 to 300, got 1"),
    ("fill_mask", MASKED, "", {"steps": "many"}, "Steps must be a whole number"),
    ("fill_mask", MASKED, "", {"which": -1}, "'Which' .* must be a whole number of at least 0, got -1"),
    ("fill_mask", MASKED, "", {"which": 2}, "There is no \\[MASK\\] 2: the input has 1 \\[MASK\\], so 'Which' must "
                                            "be 1 \\(counting from 1\\), or 0 for the default\\."),
    ("fill_mask", MASKED, "", {"method": "lime"}, "Unknown method 'lime'"),
    ("fill_mask", MASKED, "", {"score": "odds"}, "Unknown score 'odds'"),
    ("fill_mask", "the cat sat.", "", {}, "no mask token found"),
    ("fill_mask", "x" * 100_001, "", {}, "too long: 100,001 characters"),
])
def test_bad_input_is_a_clear_error(services, task, text, pair, changes, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(actions.explain_prediction)(services, "default", task, text, pair, **changes)


@pytest.mark.parametrize("key,task,match", [
    ("encoder", "fill_mask", r"has no masked LM \(Fill-mask\) head .*pick another prediction"),
    ("default", "classify", r"has no sequence classification head .*fine-tune it for sequence classification"),
])
def test_a_model_without_the_head_says_so(services, key, task, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(actions.explain_prediction)(services, key, task, "the cat sat.", "")


def test_the_form_follows_the_task() -> None:
    text, pair, target, which = actions.form_updates("choose")
    assert (text["label"], pair["label"]) == ("Context", "Choices, one per line")
    assert which["label"].startswith("Which choice") and "not used" in target["placeholder"]
    # The dropdown offers every registered target, the built-ins in the API's order, each with an example (a
    # head registered later adds its own: tests/model/test_head_specs.py runs this check with a toy one).
    check_attribution_targets()


@pytest.fixture(scope="module")
def served(services) -> Iterator[tuple[gr.Blocks, Client]]:
    demo = small_app(services, tab.build)
    with serve(demo) as client:
        yield demo, client


@pytest.fixture(scope="module")
def client(served) -> Client:
    return served[1]


def test_the_api_gives_the_same_numbers(client, services) -> None:
    summary, page, bars, numbers = client.predict(model_key="default", task="fill_mask", text=MASKED, steps=16,
                                                  api_name="/attribute")
    expected = attribute(services.model("default"), "fill_mask", MASKED, n_steps=16)
    assert numbers["attributions"] == pytest.approx(expected.attributions, abs=1e-12)
    assert numbers["convergence_delta"] == pytest.approx(expected.convergence_delta, abs=1e-12)
    assert numbers["tokens"] == expected.tokens and "convergence delta" in summary and 'class="why-tokens"' in page
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/attribute"]
    names = [p["parameter_name"] for p in api["parameters"]]
    assert names == ["model_key", "task", "text", "text_pair", "target", "which", "method", "score", "steps"]
    assert [p["parameter_name"] for p in api["parameters"] if not p["parameter_has_default"]] == ["text"]


def test_the_api_refuses_bad_input_and_keeps_serving(client) -> None:
    with pytest.raises(Exception, match="no mask token found"):
        client.predict(model_key="default", task="fill_mask", text="the cat sat.", api_name="/attribute")
    assert client.predict(model_key="default", task="fill_mask", text=MASKED, method="gradient_x_input",
                          api_name="/attribute")[3]["method"] == "gradient_x_input"


@pytest.mark.parametrize("what,index,count,message", [
    ("word", 6, 4, "There is no word 7: the input has 4 words, so 'Which' must be 1 to 4 (counting from 1), or 0 for "
                   "the default."),
    ("choice", 1, 1, "There is no choice 2: the input has 1 choice, so 'Which' must be 1 (counting from 1), or 0 for "
                     "the default."),
])
def test_an_index_past_the_end_is_said_in_the_forms_numbering(what: str, index: int, count: int, message: str) -> None:
    assert actions.which_message(NoSuchIndex(what, index, count)) == message


def _wait(condition: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.02)


def test_an_example_click_then_explain_runs_one_explanation(served, monkeypatch, no_internet) -> None:
    """The page's two requests, as the browser sends them from one session: the example's run
    (``attribute_example_run``) and, while it computes, *Explain* on the unchanged form (``attribute``)."""
    release, runs, real = threading.Event(), [], actions.attribute

    def held(*args: Any, **kwargs: Any) -> Any:                # the first explanation computes until released
        runs.append(args[1:3])
        assert release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(actions, "attribute", held)
    demo, client = served
    with httpx.Client(timeout=60) as http, httpx.Client(timeout=60) as listening:
        index = {d.get("api_name"): i for i, d in enumerate(client.config["dependencies"])}
        base = client.src.rstrip("/") + "/" + client.config.get("api_prefix", "").strip("/")
        session, form = uuid.uuid4().hex, ["default", *actions.EXAMPLES[0], "integrated_gradients", "logit", 7]
        messages: list[dict[str, Any]] = []

        def join(name: str) -> None:
            body = {"data": form, "fn_index": index[name], "session_hash": session, "event_data": None,
                    "trigger_id": None}
            assert http.post(f"{base}/queue/join", json=body).status_code == 200

        def listen() -> None:
            with listening.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
                for line in stream.iter_lines():
                    messages.append(json.loads(line[5:]) if line.startswith("data:") else {})
                    if sum(m.get("msg") == "process_completed" for m in messages) == 2:
                        return

        join("attribute_example_run")
        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        try:
            _wait(lambda: len(runs) == 1)
            join("attribute")
            _wait(lambda: in_flight.table_for(demo).counts() == (1, 1))   # Explain joined the example's run
            assert heavy_limits.gate_for(demo).counts() == (1, 0)           # and took no place in the line
        finally:
            release.set()
        listener.join(60)
    done = [m for m in messages if m.get("msg") == "process_completed"]
    assert len(done) == 2 and all(m["success"] for m in done), done
    assert done[0]["output"]["data"] == done[1]["output"]["data"] and "Why" in done[0]["output"]["data"][0]
    assert len(runs) == 1                                               # one explanation
    assert not [m for m in messages if "ahead of yours" in json.dumps(m)]     # never told of its own request
