"""bench/attribution.py on a tiny model: the input has exactly the asked length, the plain pass is the gradient
the attribution uses (its gradient x input equals captum's), and the figures are finite."""
from __future__ import annotations

import math

import pytest
import torch

from support.bench_helpers import load_bench_script
from engine.model.loaded_model import LoadedModel
from engine.probes.attribution.methods import attribute, make_target
from support.probing_helpers import tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def loaded(tiny_tokenizer) -> LoadedModel:
    model = tiny_model(2, heads=("mlm",))
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny mlm")


def test_the_input_has_the_length_asked_for(loaded) -> None:
    bench = load_bench_script("attribution")
    for tokens in (24, 32):
        text = bench.text_of_length(loaded, tokens)
        assert len(loaded.tokenizer.encode(text).input_ids) == tokens and "[MASK]" in text


def test_the_plain_pass_is_the_attributions_gradient(loaded) -> None:
    bench = load_bench_script("attribution")
    text = bench.text_of_length(loaded, 24)
    gradient = bench.plain_pass(loaded, text)()                                      # (1, S, H)
    target = make_target(loaded, "fill_mask", text)
    with torch.no_grad():
        embeddings = loaded.model.bert.embeddings.word_embeddings(torch.tensor([target.input_ids]))
    expected = attribute(loaded, "fill_mask", text, method="gradient_x_input").attributions
    assert (gradient * embeddings).sum(-1)[0].tolist() == pytest.approx(expected, abs=1e-6)


def test_the_figures_are_finite(loaded) -> None:
    bench = load_bench_script("attribution")
    found = bench.measure(loaded, 24, rounds=1, steps=(4, 8), warmup=0)
    assert found["tokens"] == 24 and set(found["by_steps"]) == {4, 8}
    numbers = [found[k] for k in ("first_s", "ig_s", "gxi_s", "plain_s", "delta", "difference")]
    numbers += [x for row in found["by_steps"].values() for x in row]
    assert all(math.isfinite(x) for x in numbers) and found["plain_s"] > 0
