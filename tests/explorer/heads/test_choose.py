"""Heads tab, Choose: the handler's outputs equal engine.probes.heads.choose, choices come one per line (2 to 5), bad input
and a model without the multiple-choice head are one clear sentence."""
from __future__ import annotations

import gradio as gr
import pytest

from engine.probes.heads.choose import choose
from explorer.formatting import percent, rounded
from explorer.heads import choose as section
from explorer.ui_errors import friendly_errors
from support.heads_helpers import head_services

pytestmark = pytest.mark.usefixtures("one_thread")

CONTEXT = "the cat sat on the mat."
CHOICES = ["then it ran to the house.", "a red car.", "the bird sang in the tree."]


@pytest.fixture(scope="module")
def services(tiny_tokenizer):
    return head_services(tiny_tokenizer)


def test_outputs_equal_the_engine(services) -> None:
    summary, bars, results = section.predict(services, "chooser", CONTEXT, "\n".join(CHOICES))
    expected = choose(services.model("chooser"), CONTEXT, CHOICES)
    assert results == [{"index": i, "choice": c, "score": rounded(p), "logit": rounded(z)}
                       for i, (c, p, z) in enumerate(zip(CHOICES, expected.probabilities, expected.logits))]
    assert list(bars.data[0].x) == expected.probabilities
    assert list(bars.layout.yaxis.ticktext) == [f"{i}. {c}" for i, c in enumerate(CHOICES, start=1)]
    best = expected.best
    assert summary.startswith(f"**Choice {best + 1}**: {CHOICES[best]} · {percent(expected.probabilities[best])} "
                              "(softmax over 3 choices)")


def test_choices_are_the_non_blank_lines() -> None:
    assert section.parse_choices("  a \n\n b\r\n c  \n") == ["a", "b", "c"]


@pytest.mark.parametrize("context,choices,match", [
    ("", "a\nb", "Type a context"),
    (CONTEXT, "", "Type 2 to 5 choices, one per line"),
    (CONTEXT, "only one\n \n", "Give 2 to 5 choices, one per line; got 1"),
    (CONTEXT, "\n".join("abcdef"), "Give 2 to 5 choices, one per line; got 6"),
    (CONTEXT, "a\n" + "cat " * 60, "the context with choice 2 is 70 tokens long"),
])
def test_bad_input_is_a_clear_error(services, context, choices, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(section.predict)(services, "chooser", context, choices)


@pytest.mark.parametrize("key", ["default", "encoder", "classifier"])
def test_a_model_without_the_head_is_told_how_to_get_one(services, key) -> None:
    with pytest.raises(gr.Error, match=r"has no multiple choice head .*fine-tune it for multiple choice in the "
                                      r"Fine-tune tab, then pick the result"):
        friendly_errors(section.predict)(services, key, CONTEXT, "\n".join(CHOICES))
