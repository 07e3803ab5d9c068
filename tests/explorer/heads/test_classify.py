"""Heads tab, Classify: the handler's outputs equal engine.probes.heads.classify (labels from id2label), bad input and a
model without the sequence-classification head are one clear sentence."""
from __future__ import annotations

import gradio as gr
import pytest

from engine.probes.heads.classify import classify, classify_details
from explorer.formatting import percent, rounded
from explorer.heads import classify as section
from explorer.ui_errors import friendly_errors
from support.heads_helpers import SENTIMENT, head_services

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the cat sat on the mat."


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return head_services(tiny_tokenizer)


@pytest.mark.parametrize("pair", ["", "then it ran."])
def test_outputs_equal_the_engine(services, pair) -> None:
    summary, bars, results = section.predict(services, "classifier", TEXT, pair)
    loaded = services.model("classifier")
    expected = classify_details(loaded, TEXT, pair or None)
    assert results == [{"label": r["label"], "score": rounded(r["score"])} for r in classify(loaded, TEXT, pair)]
    assert [r["label"] for r in results] == [r["label"] for r in expected.to_pipeline()]
    assert list(bars.layout.yaxis.ticktext) == list(SENTIMENT.values())            # by label id
    assert list(bars.data[0].x) == expected.scores
    assert bars.data[0].marker.color[expected.best] == section.plots.BEST_COLOR
    best = expected.labels[expected.best]
    assert summary.startswith(f"**{best}** {percent(max(expected.scores))} · softmax over 3 labels")
    assert ("(a text pair)" in summary) == bool(pair)


@pytest.mark.parametrize("text,pair,match", [
    ("", "", "Type a text to classify"),
    ("cat " * 70, "", "72 tokens long but this model reads at most 64"),
    (TEXT, "x" * 100_001, "The second text is too long"),
])
def test_bad_input_is_a_clear_error(services, text, pair, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(section.predict)(services, "classifier", text, pair)


@pytest.mark.parametrize("key", ["default", "encoder", "tagger"])
def test_a_model_without_the_head_is_told_how_to_get_one(services, key) -> None:
    with pytest.raises(gr.Error, match=r"has no sequence classification head .*fine-tune it for sequence "
                                      r"classification in the Fine-tune tab, then pick the result"):
        friendly_errors(section.predict)(services, key, TEXT, "")
