"""Compare tab, served: /compare answers like the engine through gradio_client, two checkpoints of a run
show a change, the run scrubber compares a checkpoint with the run's last, bad input is one sentence and
every user event clears its outputs when it fails."""
from __future__ import annotations


import gradio as gr
import numpy as np
import pytest

from support.event_helpers import failure_clears
from explorer.compare import tab
from explorer.services import Services
from support.hostile_helpers import call, expect_error
from support.probing_helpers import RUN, STEPS, make_services, tab_app, write_run
from engine.probes.attention.maps import attention
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import write_spec
from engine.training.tasks.qa_with_mlm import QAWithMLMTask
from engine.training.tasks.token_classification import TokenClassificationTask
from explorer.compare import notes

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "the cat [MASK] on the mat ."
TAGGER, QA_MLM = "tagger-run", "qa-mlm-run"        # fine-tuning runs: token classification, QA with MLM


@pytest.fixture(scope="module")
def services(tmp_path_factory, tiny_tokenizer) -> Services:
    runs = tmp_path_factory.mktemp("compare-runs")
    write_run(runs, tiny_tokenizer)
    for run, task in ((TAGGER, TokenClassificationTask.name), (QA_MLM, QAWithMLMTask.name)):
        write_run(runs, tiny_tokenizer, steps=(2,), run=run, later_by_s=-100)     # older: RUN stays the newest
        write_spec(RunFolder(runs / run), {"task": task})                        # what a fine-tuning run records
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
    assert "was fine-tuned" not in summary                                       # a pretraining run: no note
    rows = fillers["data"]
    assert rows and all(row[0] == 1 for row in rows) and len(rows) >= 3
    assert any(row[2] != row[3] for row in rows)                                   # the probabilities moved
    assert "linear CKA" in str(similarity) and "B − A" in str(attention)


def test_a_model_against_itself(client) -> None:
    summary = client.predict("default", "default", TEXT, 1, 0, 5, api_name="/compare")[0]
    assert "the same at every layer" in summary


def test_the_scrubber_compares_a_checkpoint_with_the_runs_last(client) -> None:
    key_a, key_b, note, summary, *_ = client.predict(RUN, 0, TEXT, 1, 0, 3, api_name="/compare_over_run")
    assert (key_a, key_b) == (checkpoint(STEPS[0]), checkpoint(STEPS[-1]))
    assert f"Checkpoint 1 of {len(STEPS)}" in note and "Mask 1:" in summary
    key_a = client.predict(RUN, len(STEPS) - 1, TEXT, 1, 0, 3, api_name="/compare_over_run")[0]
    assert key_a == checkpoint(STEPS[-1])


def test_the_scrubber_keeps_a_position_past_the_end_to_the_last_checkpoint(services) -> None:
    key_a, key_b, note, *_ = tab.scrub(services, RUN, 99, TEXT, 1, 0, 3)
    assert key_a == key_b == checkpoint(STEPS[-1]) and f"Checkpoint {len(STEPS)} of {len(STEPS)}" in note


@pytest.mark.parametrize("args,message", [
    (("default", "default", "", 1, 0, 5), "Type a sentence to compare"),
    (("default", "", TEXT, 1, 0, 5), "Choose two models"),
    (("default", "nope", TEXT, 1, 0, 5), "Models available now"),
    (("default", "default", TEXT, 9, 0, 5), "layer 9 does not exist: this model has 2 layers, numbered 1 to 2"),
    (("default", "default", TEXT, 1, 4, 5), "head 4 does not exist: each layer has 4 heads, numbered 0 to 3"),
    (("default", "default", TEXT, 0, 0, 5), "less than minimum value 1"),          # Gradio's own bound: from 1
    (("default", "default", TEXT, 1, 0, 0), "less than minimum value 1"),
    (("default", "default", TEXT + " the dog ran" * 30, 1, 0, 5), "tokens long but this model takes at most 64"),
])
def test_bad_input_is_one_sentence_and_the_app_keeps_serving(client, args, message) -> None:
    expect_error(call(client, *args, api_name="/compare"), message)
    assert "the same at every layer" in client.predict("default", "default", TEXT, 1, 0, 5, api_name="/compare")[0]


def test_chart_and_message_number_layers_alike(services) -> None:
    """The CKA chart runs over layers 0 (the embeddings' output) to 2; the attention layer is chosen from 1 to 2,
    and layer 1 draws the engine's first attention layer, attentions[0]; layer 0 has no attention."""
    summary, _, similarity, heatmap, pair = tab.predict(services, "default", checkpoint(STEPS[0]), TEXT, 1, 2)
    assert list(similarity.data[0].x) == ["layer 0 (embeddings)", "layer 1", "layer 2"]
    assert list(heatmap.data[0].y) == ["layer 0 (embeddings)", "layer 1", "layer 2"]
    assert "at layer 0 (the embeddings' output)" in summary and "at the last layer (2)" in summary
    assert "Attention: layer 1, head 2" in summary and pair.layout.title.text.startswith("Layer 1, head 2")
    first = attention(services.model("default"), TEXT).attentions[0, 2]
    np.testing.assert_allclose(np.asarray(pair.data[0].z), first, atol=1e-4)
    with pytest.raises(ValueError, match="layer 0 is the embeddings' output, before any attention: the layers "
                                         "with attention heads are numbered 1 to 2"):
        tab.predict(services, "default", "default", TEXT, 0, 0)
    assert 'data-gloss="gloss-cka"' in tab.INTRO and "Layer</abbr> 0 is the embeddings' output" in tab.INTRO


def test_a_fine_tuned_models_untrained_mlm_head_is_explained(services) -> None:
    """Model B from a token-classification run: its masked-LM head was not trained, and the summary says so
    beside the fillers; a run that trains the MLM head too (QA with MLM) and a pretraining run get no note."""
    tagger = f"checkpoint:{TAGGER}/step-000002"
    summary = tab.predict(services, "default", tagger, TEXT, 1, 0)[0]
    assert ("Model B was <abbr" in summary and "for **token classification**; its masked-LM head was not trained in "
            "fine-tuning" in summary and "so its fill-mask guesses are not meaningful" in summary)
    assert summary.index("Mask 1:") < summary.index("Model B was")                  # beside the fill-mask lines
    assert "Model A was" not in summary
    swapped = tab.predict(services, tagger, "default", TEXT, 1, 0)[0]
    assert "Model A was" in swapped and "Model B was" not in swapped
    assert notes.untrained_mlm_task(services.model(tagger)) == "token classification"
    for key in (f"checkpoint:{QA_MLM}/step-000002", checkpoint(STEPS[0]), "default"):
        assert notes.untrained_mlm_task(services.model(key)) is None, key
    no_mask = tab.predict(services, "default", tagger, "the cat sat on the mat .", 1, 0)[0]
    assert "was fine-tuned" not in no_mask                                         # no fill-mask: nothing to explain


def test_every_user_event_clears_its_outputs_on_failure(app) -> None:
    demo, widgets = app
    outputs = [widgets[name] for name in ("summary", "fillers", "similarity", "heatmap", "attention")]
    for api_name in ("compare", "compare_submit", "compare_example_run", "compare_over_run"):
        assert failure_clears(demo, api_name, outputs), api_name
