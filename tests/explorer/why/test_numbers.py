"""What a learner reads in the Why tab: every number a percentage (a probability, or a change of one) or a plain
decimal (a logit), never an exponent such as 1.2e-05, even for a tiny probability."""
from __future__ import annotations

import re

import pytest

from engine.probes.attribution.methods import Attribution
from explorer.formatting import plain_markdown
from explorer.why import actions, plots
from engine.probes.attribution.targets import probability_text
from explorer.why.numbers import decimal, shown
from explorer.why.token_html import attribution_html

EXPONENT = re.compile(r"\d[eE][-+]?\d")


def tiny_attribution(score: str = "probability", method: str = "integrated_gradients") -> Attribution:
    """A fill-mask attribution of a very unlikely word: every number far below 0.0001."""
    integrated = method == "integrated_gradients"
    return Attribution(
        task="fill_mask", source="default", tokens=["[CLS]", "the", "cat", "[MASK]", "[SEP]"], token_type_ids=[0] * 5,
        attributions=[0.0, 7.66e-06, -2.1e-05, 0.0, 0.0], method=method, score=score,
        target="'zebra' at [MASK] (position 3)", target_position=3,
        prediction=f"'sat' (probability {probability_text(1.2e-05)})", target_score=1.234e-05,
        baseline="[PAD] for every token" if integrated else None, baseline_tokens=None,
        baseline_score=2.5e-05 if integrated else None, convergence_delta=3.1e-09 if integrated else None,
        n_steps=50 if integrated else None, warnings=["top_k=99 is larger than the vocabulary; using 30"])


@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
def test_a_tiny_probability_reads_as_a_percentage_in_the_summary(method) -> None:
    summary = actions.summary_markdown(tiny_attribution(method=method))
    assert not EXPONENT.search(summary), summary
    assert "**0.00123%** at the input" in summary                          # 1.234e-05 as a percentage
    assert plain_markdown("'sat' (probability 0.0012%)") in summary      # the engine's words for 1.2e-05
    assert "ℹ️ top_k=99 is larger" in summary                               # the engine's warnings, as they are
    if method == "integrated_gradients":
        assert "**0.0025%** at the baseline" in summary
        assert "add up to **−0.00133%**" in summary and "delta is **+<0.001%**" in summary   # changes: signed points


def test_a_tiny_logit_reads_as_a_plain_decimal() -> None:
    summary = actions.summary_markdown(tiny_attribution(score="logit"))
    assert not EXPONENT.search(summary), summary
    assert "**0.0000123** at the input" in summary and "**0.000025** at the baseline" in summary
    assert "convergence delta is **≈0**" in summary


@pytest.mark.parametrize("percent_points", [False, True])
def test_the_coloured_tokens_and_the_bars_print_no_exponent(percent_points) -> None:
    found = tiny_attribution()
    page = attribution_html(found.tokens, found.attributions, found.target_position, percent_points=percent_points)
    bars = plots.top_tokens_figure(found.tokens, found.attributions, percent_points=percent_points)
    texts = [*bars.data[0].text, *(row[1] for row in bars.data[0].customdata)]
    assert not EXPONENT.search(page) and not any(EXPONENT.search(t) for t in texts), (page, texts)
    assert ("−0.0021%" if percent_points else "-0.000021") in page
    assert bars.layout.xaxis.exponentformat == "none"


def test_decimal_and_shown() -> None:
    assert [decimal(v) for v in (3.14159, 1.234e-05, -2.5e-05, 1e-07, 0.0, 1234.5, float("nan"))] == [
        "3.14", "0.0000123", "-0.000025", "≈0", "0", "1234", "–"]
    assert shown(-2.1e-05, percent_points=True) == "−0.0021%" and shown(None) == "–"
