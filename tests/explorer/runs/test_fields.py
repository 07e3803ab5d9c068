"""``explorer.runs.fields.ranged_number``: the browser steps within the range, the handler gets what was typed."""
from __future__ import annotations

import gradio as gr

from explorer.runs.fields import LEARNING_RATE, MASK_RATE, ranged_number


def test_the_limits_are_the_browsers_and_every_usual_rate_is_on_the_grid() -> None:
    with gr.Blocks(analytics_enabled=False):
        rate = ranged_number(0.0005, "Learning rate", LEARNING_RATE)
    assert (rate.step, rate.minimum, rate.maximum) == LEARNING_RATE and rate.label == "Learning rate"
    for usual in (1e-5, 3e-5, 5e-5, 1e-4, 5e-4, 1e-3):
        steps = (usual - LEARNING_RATE[1]) / LEARNING_RATE[0]
        assert abs(steps - round(steps)) < 1e-6, usual                  # ArrowUp from it stays on the grid
    assert MASK_RATE[1] <= 0.15 <= MASK_RATE[2] < 1.0


def test_out_of_range_values_reach_the_handler_and_precision_still_rounds() -> None:
    """The range is not checked here (the form's check names the setting); ``precision`` still applies."""
    with gr.Blocks(analytics_enabled=False):
        masking = ranged_number(0.15, "Masking rate", MASK_RATE)
        steps = ranged_number(100, "Steps", (1, 1, 1000), precision=0)
    assert masking.preprocess(1.5) == 1.5 and masking.preprocess(-1) == -1 and masking.preprocess(None) is None
    assert steps.preprocess(2000.4) == 2000 and isinstance(steps.preprocess(2000.4), int)
