"""Errors as users read them: words, no exception class names, no server paths."""
from __future__ import annotations

import gradio as gr
import pytest

from explorer.ui_errors import friendly_errors, hide_paths, shown


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
