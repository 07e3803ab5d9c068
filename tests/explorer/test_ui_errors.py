"""Errors as users read them: words, no exception class names, no server paths."""
from __future__ import annotations

import re

import gradio as gr
import pytest

from explorer.ui_errors import check_number_inputs, friendly_errors, hide_paths, shown, whole_number


@pytest.mark.parametrize("message, expected", [
    ("No such file: /srv/app/runs/a/run.json here", "No such file: …/run.json here"),
    ("[Errno 2] No such file or directory: '/root/x/y.txt'", "[Errno 2] No such file or directory: '…/y.txt'"),
    ("inside: /work/models, /tmp/runs.", "inside: …/models, …/runs."),
    ("C:\\Users\\me\\model\\config.json is bad", "…/config.json is bad"),
    ("There is no model folder at models/foo.", "There is no model folder at models/foo."),   # relative: kept
    ("ratio 1/2 and/or 3/4", "ratio 1/2 and/or 3/4"),
    ("hub id owner/name", "hub id owner/name"),
])
def test_absolute_paths_are_hidden(message: str, expected: str) -> None:
    assert hide_paths(message) == expected


def test_shown_drops_class_names_and_paths() -> None:
    assert shown("SafetensorError: header too large in /a/b/model.safetensors") == \
        "header too large in …/model.safetensors"


def test_friendly_errors_never_leak_a_path() -> None:
    @friendly_errors
    def load() -> None:
        open("/definitely/not/here/model.safetensors", "rb")

    with pytest.raises(gr.Error) as caught:
        load()
    assert "/definitely" not in caught.value.message and "model.safetensors" in caught.value.message


@pytest.mark.parametrize("value,message", [("x", "Layer must be a whole number, got 'x'"), (None, "whole number"),
                                           (float("inf"), "whole number"), (float("nan"), "whole number"),
                                           (2.5, "Layer must be a whole number from 0 to 6, got 2.5."),
                                           (7, "Layer must be a whole number from 0 to 6, got 7."),
                                           (True, "Layer must be a whole number, got True.")])
def test_whole_number_says_what_the_box_must_hold(value, message) -> None:
    with pytest.raises(gr.Error, match=re.escape(message)):
        whole_number(value, "Layer", 0, 6)


def test_whole_number_takes_what_forms_send() -> None:
    assert whole_number("4", "Layer", 0, 6) == whole_number(4.0, "Layer", 0, 6) == whole_number(4, "Layer", 0, 6) == 4
    assert whole_number("1e3", "Steps", 1, 10_000) == whole_number(" 2.0 ", "Steps", 1, 10_000) * 500 == 1000


def test_whole_number_without_an_upper_bound() -> None:
    assert whole_number(10**12, "Doc stride", 0) == 10**12
    with pytest.raises(gr.Error, match=re.escape("Doc stride must be a whole number of at least 0, got -1.")):
        whole_number(-1, "Doc stride", 0)
    with pytest.raises(gr.Error, match=re.escape("Steps must be a whole number from 1 to 1,000,000, got 1000001.")):
        whole_number(1_000_001, "Steps", 1, 1_000_000)


def test_number_inputs_refuse_what_is_no_number_with_the_fields_name() -> None:
    with gr.Blocks() as demo:
        layer = gr.Slider(0, 11, step=1, label="Layer (0-based)")
        rate = gr.Number(label="Learning rate")
        steps = gr.Number(label="Steps", precision=0, minimum=1)
    check_number_inputs(demo)
    for block, value, message in [(layer, "abc", "Layer (0-based) must be a whole number, got 'abc'."),
                                  (layer, None, "Layer (0-based) must be a whole number, got None."),
                                  (rate, float("inf"), "Learning rate must be a number, got inf."),
                                  (steps, True, "Steps must be a whole number, got True.")]:
        with pytest.raises(gr.Error) as caught:
            block.preprocess(value)
        assert caught.value.message == message
    assert (layer.preprocess("3"), rate.preprocess("2e-5"), rate.preprocess(None), steps.preprocess(4.0)) == \
        (3.0, 2e-5, None, 4)
    with pytest.raises(gr.Error, match="greater than maximum value 11"):       # ranges stay Gradio's check
        layer.preprocess(12)
