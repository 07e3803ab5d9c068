"""Demo sanity of the bundled default model (assets/default-model): it loads offline with every
head the tabs need, and the examples a teacher types first give sensible answers.

These are smoke tests; the measure of the model is ``bench/model_quality.py`` (see its card)."""
from __future__ import annotations

import json

import pytest
import torch

import engine
from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR
from engine.probes.inference import answer, fill_mask

MAX_BYTES_IN_GIT = 50 * 1000 * 1000


@pytest.fixture(scope="module")
def default():
    return engine.load("default")


def test_ships_in_the_repo_small_with_a_card() -> None:
    size = sum(f.stat().st_size for f in DEFAULT_MODEL_DIR.iterdir())
    assert size <= MAX_BYTES_IN_GIT
    card = (DEFAULT_MODEL_DIR / "README.md").read_text(encoding="utf-8")
    for needed in ("MiniLM", "Apache-2.0", "CC BY-SA 3.0", "CC BY-SA 4.0", "python -m engine.pretrain",
                   "python -m engine.finetune", "bench/model_quality.py"):
        assert needed in card


def test_loads_offline_with_mlm_nsp_and_qa_heads(default) -> None:
    assert set(default.model.heads) == {"mlm", "nsp", "qa"}
    assert default.source == "default"
    assert all(p.dtype == torch.float32 for p in default.model.parameters())  # stored fp16, served fp32
    config = json.loads((DEFAULT_MODEL_DIR / "config.json").read_text(encoding="utf-8"))
    assert {"BertForPreTraining", "BertForQuestionAnswering"} <= set(config["architectures"])


@pytest.mark.parametrize(("text", "expected"), [
    ("The capital of France is [MASK].", "paris"),
    ("Paris is the capital of [MASK].", "france"),
    ("The United [MASK] of America.", "states"),
    ("He was born in London, [MASK].", "england"),
    ("The [MASK] barked at the cat.", "dog"),
])
def test_fill_mask_examples_have_the_expected_word_in_the_top_5(default, text: str, expected: str) -> None:
    words = [guess["token_str"] for guess in fill_mask(default, text, top_k=5)]
    assert expected in words, words


@pytest.mark.parametrize(("question", "context", "expected"), [
    ("Who was Jim Henson?", "Jim Henson was a nice puppet", "puppet"),
    ("Where is the Eiffel Tower?", "The Eiffel Tower is a wrought-iron tower in Paris, built for the "
     "1889 World's Fair.", "paris"),
    ("When was the tower built?", "The Eiffel Tower is a wrought-iron tower in Paris, built for the "
     "1889 World's Fair.", "1889"),
    ("What did Marie Curie discover?", "Marie Curie was a physicist and chemist who discovered polonium "
     "and radium with her husband Pierre.", "polonium"),
])
def test_qa_examples_answer_with_a_span_containing_the_key_word(default, question: str, context: str,
                                                                  expected: str) -> None:
    best = answer(default, question, context, top_k=1)
    best = best[0] if isinstance(best, list) else best
    assert expected in best["answer"].lower(), best


@pytest.mark.usefixtures("no_internet")
def test_transformers_with_default_arguments_computes_in_fp32_and_gives_the_apps_numbers(default) -> None:
    # The weights are stored fp16; config.json's "dtype": "float32" makes transformers 5's default
    # dtype="auto" compute in fp32 (without it: fp16, scores off by ~1e-3 and near ties swapped).
    import transformers

    assert json.loads((DEFAULT_MODEL_DIR / "config.json").read_text(encoding="utf-8"))["dtype"] == "float32"
    pipe = transformers.pipeline("fill-mask", model=str(DEFAULT_MODEL_DIR))
    assert pipe.model.dtype == torch.float32
    for text in ("Nice to [MASK] you.", "The capital of France is [MASK].", "I [MASK] to the store yesterday.",
                 "The weather is [MASK] today.", "My favourite [MASK] is blue."):
        ours, theirs = fill_mask(default, text, top_k=5), pipe(text, top_k=5)
        assert [g["token_str"] for g in ours] == [g["token_str"] for g in theirs], text
        assert max(abs(a["score"] - b["score"]) for a, b in zip(ours, theirs)) < 1e-5, text
