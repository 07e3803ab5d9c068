"""Each tab's first example shows the bundled default model at its best: its top answer is the intended one
(the famous misses stay as later examples, with a note in the tab's intro). Measured on the real model."""
from __future__ import annotations

import numpy as np
import pytest

from engine.checkpoints.hf_format import load
from engine.model.loaded_model import LoadedModel
from engine.probes import inference
from engine.probes.heads.squad_metric import normalize_answer
from explorer.compare import plots as compare_plots
from explorer.compare import tab as compare_tab
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from explorer.fill_mask import tab as fill_mask_tab
from explorer.heads import next_sentence
from explorer.qa.examples import EXAMPLES as QA_EXAMPLES
from explorer.tokenize import tab as tokenize_tab
from explorer.why import actions as why_actions
from explorer.why import tab as why_tab


@pytest.fixture(scope="module")
def model() -> LoadedModel:
    return load("default")


def top_word(model: LoadedModel, text: str) -> str:
    return inference.fill_mask(model, text, 1)[0]["token_str"]


def test_fill_mask_first_example_is_filled_right_and_the_misses_come_later(model: LoadedModel) -> None:
    (text, targets), *later = fill_mask_tab.EXAMPLES
    assert (text, targets) == ("The United [MASK] of America.", "")
    assert top_word(model, text) == "states"
    misses = {t: top_word(model, t) for t in ("The capital of France is [MASK].", "Nice to [MASK] you.")}
    assert misses["The capital of France is [MASK]."] != "paris" and misses["Nice to [MASK] you."] != "meet"
    assert all([t, ""] in later for t in misses)
    assert "misses" in fill_mask_tab.INTRO and "CPU" in fill_mask_tab.INTRO


def test_qa_first_example_finds_the_right_span(model: LoadedModel) -> None:
    question, context = QA_EXAMPLES[0]
    found = inference.answer(model, question, context)["answer"]
    assert normalize_answer(found) == normalize_answer("a nice puppet"), found   # SQuAD exact match (it may keep the ".")


def test_why_first_example_explains_a_right_guess(model: LoadedModel) -> None:
    task, text, pair, target, _ = why_actions.EXAMPLES[0]
    assert (task, pair, target) == ("fill_mask", "", "")              # the target is the model's top guess
    assert top_word(model, text) == "states"
    assert "France" in why_tab.INTRO and "miss" in why_tab.INTRO


def test_tokenize_first_example_shows_word_pieces(model: LoadedModel) -> None:
    text, pair = tokenize_tab.EXAMPLES[0]
    tokens = [row.token for row in inference.tokenize(model, text, pair or None).rows]
    assert [t for t in tokens if t.startswith("##")] == ["##ization", "##bed", "##ding", "##s"]


def test_next_sentence_first_example_is_a_true_next_sentence(model: LoadedModel) -> None:
    a, b = next_sentence.EXAMPLES[0]
    assert inference.next_sentence(model, a, b).is_next > 0.5


def test_compare_first_example_has_a_right_guess_and_its_colour_bar_no_exponent(model: LoadedModel) -> None:
    text, layer, head = compare_tab.EXAMPLES[0]
    assert top_word(model, text) == "states" and layer >= 1 and head >= 0
    same = np.full((4, 4), 0.25)                                        # one model on both sides: B − A is zero
    figure = compare_plots.attention_pair_figure(same, same, same - same, list("abcd"), layer, head, "default",
                                                 "default")
    bar = [t for t in figure.data if t.showscale and t.colorbar.title.text == "B − A"][0]
    assert bar.zmax >= 0.01 and bar.colorbar.tickformat == ".3~f" and bar.colorbar.exponentformat == "none"
    assert "same" in compare_tab.INTRO


def test_compare_opens_on_two_different_models_and_its_first_example_shows_what_training_changed(
        model: LoadedModel, tmp_path) -> None:
    registry = ModelRegistry(runs_root=tmp_path)                       # no runs yet: a newcomer's first visit
    services = Services(tokenizer=model.tokenizer, models=registry)
    key_a, key_b = compare_tab.initial_models(registry.available_keys())
    assert (key_a, key_b) == ("default", "untrained")
    text, layer, head = compare_tab.EXAMPLES[0]
    summary, fillers, *_ = compare_tab.predict(services, key_a, key_b, text, layer, head)
    row = fillers[fillers["filler"] == "states"].iloc[0]
    assert row["rank in A"] == 1 and row["rank in B"] > 1              # trained finds it, the twin does not
    assert "e-0" not in summary and "e+0" not in summary
