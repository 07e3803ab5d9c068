"""What the Compare tab shows of how alike two models' layers are (explorer/compare/similarity.py): debiased CKA over
the bundled sentence set first, with its token count; this input's beside it with its count, and a caution when it
has fewer tokens than the models have dimensions. The first example (the bundled default model against its untrained
twin) shows a low CKA over 1,052 tokens; the set's states are computed once per model for every visitor."""
from __future__ import annotations

import numpy as np
import pytest

from engine.checkpoints.hf_format import load
from engine.probes.comparison.compare import compare_models
from engine.probes.comparison.sentence_set import compare_on_sentences
from explorer.compare import similarity, tab
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.probing_helpers import make_services

pytestmark = pytest.mark.usefixtures("one_thread")
LONG = " ".join(["the cat sat on the mat and the dog ran to the red house ."] * 3)    # 47 tokens > 32 dimensions


@pytest.fixture(scope="module")
def services(tiny_tokenizer) -> Services:
    return make_services(tiny_tokenizer)


@pytest.mark.slow
def test_the_first_example_shows_a_low_cka_over_the_set_with_its_token_count_and_the_caution(tmp_path) -> None:
    model = load("default")
    services = Services(tokenizer=model.tokenizer, models=ModelRegistry(runs_root=tmp_path))
    text, layer, head = tab.EXAMPLES[0]
    summary, _, line, heatmap, _ = tab.predict(services, "default", "untrained", text, layer, head)
    over_set, one_input, plain, cosine = line.data
    assert over_set.name == "debiased CKA, sentence set (1,052 tokens of 80 sentences)"
    assert max(over_set.y) < 0.55 and np.mean(over_set.y) < 0.45      # measured 0.47 at most, 0.39 on average
    assert one_input.name == "debiased CKA, this input (8 tokens)" and plain.name == "plain CKA, this input (8 tokens)"
    assert min(plain.y) > 0.75 and plain.visible == "legendonly"      # the biased estimator, one click away
    assert "over 1,052 tokens of 80 sentences" in line.layout.title.text
    assert "⚠ this input: 8 tokens, fewer than its 384 dimensions" in line.layout.title.text
    assert "over 1,052 tokens of 80 sentences" in heatmap.layout.title.text
    np.testing.assert_allclose(np.diag(np.asarray(heatmap.data[0].z, dtype=float)), over_set.y, atol=1e-4)
    assert "over the bundled sentence set (**1,052 tokens of 80 sentences**): debiased linear CKA 0.4" in summary
    assert "On this input alone (**8 tokens**)" in summary
    assert "⚠️ This input has 8 tokens, fewer than the 384 dimensions of the models' vectors" in summary


def test_an_input_with_enough_tokens_gets_no_caution(services) -> None:
    summary, _, line, _, _ = tab.predict(services, "default", "encoder", LONG, 1, 0)
    assert "On this input alone (**47 tokens**)" in summary and "⚠" not in summary
    assert "⚠" not in line.layout.title.text and line.data[1].name == "debiased CKA, this input (47 tokens)"
    few = tab.predict(services, "default", "encoder", "the cat sat on the mat .", 1, 0)
    assert "⚠️ This input has 9 tokens, fewer than the 32 dimensions" in few[0]


def test_an_input_too_short_for_the_debiased_estimator_says_so(services) -> None:
    summary, _, line, _, _ = tab.predict(services, "default", "encoder", "cat", 1, 0)
    assert "On this input alone (3 tokens): debiased CKA needs at least 4" in summary
    assert line.data[0].name.startswith("debiased CKA, sentence set (") and line.data[0].name.endswith(
        " tokens of 80 sentences)")
    assert line.data[1].name == "plain CKA, this input (3 tokens)"          # no debiased line for 3 tokens


def test_the_set_matches_the_engine_and_is_computed_once_for_every_visitor(services) -> None:
    a, b = services.model("default"), services.model("encoder")
    cache = services.forward_cache
    first = similarity.set_comparison(services, a, b)
    np.testing.assert_allclose(first.cka, compare_on_sentences(a, b).cka, atol=1e-9)
    kept = cache.get(similarity.STATES_VISITOR, a.model, similarity.STATES_KEY)
    assert kept is not None and kept.states.shape[0] == 3                     # every hidden state, float32
    hits = cache.stats.hits
    assert similarity.set_comparison(services, a, b) is first                 # the pair's CKA was kept
    cache.forget(similarity.PAIRS_VISITOR)
    misses = cache.stats.misses
    again = similarity.set_comparison(services, a, b)                         # CKA again, from the kept states
    assert cache.stats.misses == misses and cache.stats.hits > hits
    np.testing.assert_array_equal(first.cka, again.cka)
    swapped = similarity.set_comparison(services, b, a)                       # B against A: the transpose
    np.testing.assert_allclose(swapped.cka, first.cka.T, atol=1e-12)


def test_a_set_that_cannot_be_compared_leaves_this_inputs_lines(services) -> None:
    comparison = compare_models(services.model("default"), services.model("encoder"), LONG)
    reason = "ℹ️ Over the sentence set: no sentence could be lined up; the figures show this input only."
    assert similarity.summary_lines(comparison, reason)[0] == reason
    assert [line.kind for line in similarity.similarity_lines(comparison, reason)] == ["input", "plain", "cosine"]
    assert similarity.figure_note(comparison, reason) == "this input only"
