"""Heads tab, Next sentence: the handler's outputs equal engine.probes.heads.next_sentence, bad input and a model
without the NSP head are one clear sentence."""
from __future__ import annotations

import gradio as gr
import pytest

from engine.probes.heads.next_sentence import next_sentence
from explorer.formatting import percent, rounded
from explorer.heads import next_sentence as section
from explorer.ui_errors import friendly_errors
from support.heads_helpers import head_services

pytestmark = pytest.mark.usefixtures("one_thread")

A, B = "the cat sat on the mat.", "then it ran to the house."


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return head_services(tiny_tokenizer)


def test_outputs_equal_the_engine(services) -> None:
    summary, bars, attention, results = section.predict(services, "default", A, B)
    expected = next_sentence(services.model("default"), A, B)
    assert results == [{"label": r["label"], "score": rounded(r["score"])} for r in expected.to_pipeline()]
    assert summary.startswith(f"**P(IsNext) = {percent(expected.is_next)}**: the model thinks B ")
    assert list(bars.data[0].x) == expected.probabilities
    assert list(bars.layout.yaxis.ticktext) == ["IsNext", "NotNext"]
    assert list(bars.data[0].text) == [percent(p) for p in expected.probabilities]
    heat = attention.data[0]
    assert [list(row) for row in heat.z] == expected.cls_attention
    assert list(attention.layout.xaxis.ticktext) == expected.tokens
    segment_b = [i for i, t in enumerate(expected.token_type_ids) if t == 1]
    assert [round(s.x0 + 0.5) for s in attention.layout.shapes] == segment_b


def test_the_verdict_says_which_way_in_words() -> None:
    from engine.probes.heads.next_sentence import NextSentenceResult
    follows = NextSentenceResult(A, B, "m", ["[CLS]"], [0], [2.0, 0.0], [0.881, 0.119], [[1.0]])
    assert "the model thinks B follows A" in section.verdict(follows) and "88.1%" in section.verdict(follows)
    random = NextSentenceResult(A, B, "m", ["[CLS]"], [0], [0.0, 2.0], [0.119, 0.881], [[1.0]])
    assert "does not follow A" in section.verdict(random)


@pytest.mark.parametrize("a,b,match", [
    ("", B, "Type sentence A"),
    (A, "  ", "Type sentence B"),
    ("cat " * 40, "dog " * 30, "73 tokens long but this model reads at most 64"),
])
def test_bad_input_is_a_clear_error(services, a, b, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(section.predict)(services, "default", a, b)


@pytest.mark.parametrize("key", ["encoder", "classifier"])
def test_a_model_without_the_head_is_told_how_to_get_one(services, key) -> None:
    with pytest.raises(gr.Error, match=r"has no next sentence \(NSP\) head .*pretrain one with next-sentence "
                                      r"prediction in the Training tab.*then pick the result in the model picker"):
        friendly_errors(section.predict)(services, key, A, B)
