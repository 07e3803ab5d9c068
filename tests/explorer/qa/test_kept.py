"""explorer/qa/kept.py: the QA tab runs the model once per (question, context, max sequence length, doc stride);
Top-k, max answer length and allow-no-answer changes pick from the kept logits and answer exactly what a fresh
engine run gives, over several windows too. Forwards are counted with a hook on the encoder."""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.probes import inference  # noqa: E402
from explorer.qa import kept, tab  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.forward_counting import Forwards, pinned_services, tiny_loaded  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

QUESTION = "who sat on the mat?"
CONTEXT = "the cat sat on the mat. the dog ran in the house. a bird sang in the tree."
LONG = " ".join([CONTEXT] * 6)                  # several windows of 48 tokens




def _loaded(tokenizer, seed: int = 0) -> LoadedModel:
    return tiny_loaded(tokenizer, ("qa",), seed)


@pytest.fixture()
def services(tiny_tokenizer) -> Services:
    return pinned_services(tiny_tokenizer, _loaded(tiny_tokenizer))


def _answer(services: Services, context: str, top_k: int = 1, answer_len: int = 15, seq_len: int = 48,
            stride: int = 16, impossible: bool = False) -> tuple:
    return tab.answer_question(services, "default", QUESTION, context, top_k, answer_len, seq_len, stride, impossible)


SETTINGS = [(1, 15, False), (3, 15, False), (3, 4, False), (20, 1, True), (2, 30, True), (1, 15, True)]


def _drawn(figure) -> dict:
    """What a figure draws: its traces and layout without ``meta`` (the export's names, stamped by the tab)."""
    shown = figure.to_plotly_json()
    return {"data": shown["data"], "layout": {k: v for k, v in shown["layout"].items() if k != "meta"}}


@pytest.mark.parametrize("context", [CONTEXT, LONG])
def test_a_settings_change_runs_no_model_and_equals_a_fresh_run(services: Services, context: str) -> None:
    loaded = services.model("default")
    forwards = Forwards(loaded)
    _answer(services, context)
    assert forwards.count == 1                             # all windows in one batch
    shown = {s: _answer(services, context, s[0], s[1], impossible=s[2]) for s in SETTINGS}
    decoded = {s: kept.answer_details(services, loaded, QUESTION, context, s[0], s[1], 48, 16, s[2]) for s in SETTINGS}
    assert forwards.count == 1
    for (k, answer_len, impossible), outputs in shown.items():
        fresh = inference.answer_details(loaded, QUESTION, context, k, answer_len, 48, 16,
                                         handle_impossible_answer=impossible)
        assert decoded[(k, answer_len, impossible)] == fresh                  # every field, every window
        assert outputs[1] == tab.pipeline_json(fresh) and outputs[5] == tab.summary_markdown(fresh, loaded.source)
        assert _drawn(outputs[3]) == _drawn(tab.probabilities_plot(fresh))
        assert _drawn(outputs[4]) == _drawn(tab.windows_plot(fresh))
        assert outputs[3].layout.meta["view"] == "Start and end probabilities"     # named for its export
    assert len(decoded[SETTINGS[0]].windows) == (1 if context == CONTEXT else len(fresh.windows)) > 0


def test_what_is_kept_is_the_windows_float32_logits(services: Services) -> None:
    loaded = services.model("default")
    result = inference.answer_details(loaded, QUESTION, LONG, 1, 15, 48, 16)
    windows = kept.KeptWindows.of(result)
    assert len(result.windows) > 3 and len(windows.start) == len(result.windows)
    for array, window in zip(windows.start, result.windows):
        assert array.dtype == np.float32 and array.tolist() == window.logits[0]
    assert windows.question_pieces == len(result.question_tokens) == 6


def test_the_input_or_the_model_changing_runs_the_model_again(services: Services, tiny_tokenizer) -> None:
    forwards = Forwards(services.model("default"))
    _answer(services, LONG)
    _answer(services, LONG, seq_len=40)                    # other windows: another input
    _answer(services, LONG, stride=8)
    _answer(services, CONTEXT)
    assert forwards.count == 4
    services.registry().pin("default", _loaded(tiny_tokenizer, seed=1))
    again = Forwards(services.model("default"))
    _answer(services, LONG)
    assert again.count == 1
