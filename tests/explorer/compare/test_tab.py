"""Compare tab, served: /compare answers like the engine through gradio_client, two checkpoints of a run
show a change, the run scrubber compares a checkpoint with the run's last, bad input is one sentence and
every user event clears its outputs when it fails."""
from __future__ import annotations


import gradio as gr
import pytest

from support.event_helpers import failure_clears
from explorer.compare import tab
from explorer.services import Services
from support.hostile_helpers import call, expect_error
from support.probing_helpers import RUN, STEPS, make_services, tab_app, write_run

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "the cat [MASK] on the mat ."


@pytest.fixture(scope="module")
def services(tmp_path_factory, tiny_tokenizer) -> Services:
    runs = tmp_path_factory.mktemp("compare-runs")
    write_run(runs, tiny_tokenizer)
    return make_services(tiny_tokenizer, runs)


@pytest.fixture(scope="module")
def app(services) -> tuple[gr.Blocks, dict]:
    return tab_app(services, tab.build)



def checkpoint(step: int) -> str:
    return f"checkpoint:{RUN}/step-{step:06d}"


def test_two_checkpoints_of_a_run_show_what_changed(client) -> None:
    summary, fillers, similarity, heatmap, attention = client.predict(
        checkpoint(STEPS[0]), checkpoint(STEPS[-1]), TEXT, 1, 2, 3, api_name="/compare")
    assert f"step-{STEPS[0]:06d}" in summary and "least alike at" in summary and "Mask 1:" in summary
    rows = fillers["data"]
    assert rows and all(row[0] == 1 for row in rows) and len(rows) >= 3
    assert any(row[2] != row[3] for row in rows)                                   # the probabilities moved
    assert "linear CKA" in str(similarity) and "B − A" in str(attention)


def test_a_model_against_itself(client) -> None:
    summary = client.predict("default", "default", TEXT, 0, 0, 5, api_name="/compare")[0]
    assert "the same at every layer" in summary


def test_the_scrubber_compares_a_checkpoint_with_the_runs_last(client) -> None:
    key_a, key_b, note, summary, *_ = client.predict(RUN, 0, TEXT, 0, 0, 3, api_name="/compare_over_run")
    assert (key_a, key_b) == (checkpoint(STEPS[0]), checkpoint(STEPS[-1]))
    assert f"Checkpoint 1 of {len(STEPS)}" in note and "Mask 1:" in summary
    key_a = client.predict(RUN, len(STEPS) - 1, TEXT, 0, 0, 3, api_name="/compare_over_run")[0]
    assert key_a == checkpoint(STEPS[-1])


def test_the_scrubber_keeps_a_position_past_the_end_to_the_last_checkpoint(services) -> None:
    key_a, key_b, note, *_ = tab.scrub(services, RUN, 99, TEXT, 0, 0, 3)
    assert key_a == key_b == checkpoint(STEPS[-1]) and f"Checkpoint {len(STEPS)} of {len(STEPS)}" in note


@pytest.mark.parametrize("args,message", [
    (("default", "default", "", 0, 0, 5), "Type a sentence to compare"),
    (("default", "", TEXT, 0, 0, 5), "Choose two models"),
    (("default", "nope", TEXT, 0, 0, 5), "Models available now"),
    (("default", "default", TEXT, 9, 0, 5), "layer 9 does not exist"),
    (("default", "default", TEXT, 0, 0, 0), "less than minimum value 1"),          # Gradio's own bound
    (("default", "default", TEXT + " the dog ran" * 30, 0, 0, 5), "tokens long but this model takes at most 64"),
])
def test_bad_input_is_one_sentence_and_the_app_keeps_serving(client, args, message) -> None:
    expect_error(call(client, *args, api_name="/compare"), message)
    assert "the same at every layer" in client.predict("default", "default", TEXT, 0, 0, 5, api_name="/compare")[0]


def test_every_user_event_clears_its_outputs_on_failure(app) -> None:
    demo, widgets = app
    outputs = [widgets[name] for name in ("summary", "fillers", "similarity", "heatmap", "attention")]
    for api_name in ("compare", "compare_submit", "compare_example_run", "compare_over_run"):
        assert failure_clears(demo, api_name, outputs), api_name
