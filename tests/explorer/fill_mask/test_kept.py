"""explorer/fill_mask/kept.py: the Fill-mask tab runs the model once per text; a Top-k or targets change reads
the kept logits and answers exactly what a fresh engine run gives. Forwards are counted with a hook on the
encoder (the real model runs)."""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import pytest  # noqa: E402

from conftest import tiny_config  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from engine.probes import inference  # noqa: E402
from engine.probes.heads.joint_fill import joint_fill  # noqa: E402
from explorer.fill_mask import kept, tab  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.forward_counting import Forwards, pinned_services, tiny_loaded  # noqa: E402
from support.reference import randomize_  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

ONE, TWO = "the cat [MASK] on the mat.", "the [MASK] sat on the [MASK]."




def _loaded(tokenizer, seed: int = 0) -> LoadedModel:
    return tiny_loaded(tokenizer, ("mlm",), seed)


@pytest.fixture()
def services(tiny_tokenizer) -> Services:
    return pinned_services(tiny_tokenizer, _loaded(tiny_tokenizer))


def test_a_top_k_change_runs_no_model_and_equals_a_fresh_run(services: Services) -> None:
    loaded = services.model("default")
    forwards = Forwards(loaded)
    tab.fill(services, "default", ONE, 5, "")
    assert forwards.count == 1
    shown = {k: tab.fill(services, "default", ONE, k, "")[1] for k in (1, 3, 10, 50, 5)}
    assert forwards.count == 1                             # every Top-k change read the kept guesses
    for k, results in shown.items():
        fresh = inference.fill_mask_details(loaded, ONE, k)
        assert results == fresh.to_pipeline() and len(results) == k
        assert kept.fill_details(services, loaded, ONE, k, None) == fresh


def test_a_targets_change_runs_no_model_and_equals_a_fresh_run(services: Services) -> None:
    loaded = services.model("default")
    forwards = Forwards(loaded)
    tab.fill(services, "default", ONE, 5, "")
    for k, targets in ((5, "dog, cat, sat"), (2, "dog, cat, sat"), (2, "dog"), (3, "zzzqx, cat")):
        before = forwards.count
        _, results, *_ = tab.fill(services, "default", ONE, k, targets)
        words = [w.strip() for w in targets.split(",")]
        shown = kept.fill_details(services, loaded, ONE, k, words)
        assert forwards.count == before                    # ranked from the kept logits, unknown words too
        assert results == inference.fill_mask(loaded, ONE, k, words)
        assert shown == inference.fill_mask_details(loaded, ONE, k, words)


def test_the_joint_fill_is_kept_per_text(services: Services) -> None:
    loaded = services.model("default")
    forwards = Forwards(loaded)
    *_, joint_first = tab.fill(services, "default", TWO, 5, "")
    ran = forwards.count                                   # the guesses, then one forward per mask filled
    assert ran == 1 + 2
    *_, joint_again = tab.fill(services, "default", TWO, 7, "")
    assert forwards.count == ran and joint_again == joint_first
    assert kept.joint_details(services, loaded, TWO) == joint_fill(loaded, TWO)


def test_a_text_or_model_change_runs_the_model_again(services: Services, tiny_tokenizer) -> None:
    forwards = Forwards(services.model("default"))
    tab.fill(services, "default", ONE, 5, "")
    tab.fill(services, "default", "the dog [MASK] in the house.", 5, "")
    assert forwards.count == 2
    services.registry().pin("default", _loaded(tiny_tokenizer, seed=1))      # a reloaded model: a new object
    again = Forwards(services.model("default"))
    tab.fill(services, "default", ONE, 5, "")
    assert again.count == 1


def test_a_top_k_over_the_vocabulary_warns_as_the_engine_does(services: Services, tiny_tokenizer) -> None:
    small = BertWithHeads(tiny_config(vocab_size=20), heads=("mlm",)).eval()
    loaded = LoadedModel(randomize_(small, 2, scale=0.3), tiny_tokenizer, small.config, "tiny, 20 ids")
    text = "a b [MASK] c d"                                # ids under 20
    result = kept.fill_details(services, loaded, text, 30, None)
    assert result.top_k == 20 and any("larger than the vocabulary" in w for w in result.warnings)
    assert kept.fill_details(services, loaded, text, 20, None) == inference.fill_mask_details(loaded, text, 20)
