"""explorer/why/actions.py: an attribution is kept per visitor in the forward cache under every setting it depends
on, so the very same request (a tab switch and back, an example clicked again) runs no model and shows the same
numbers, while a method, score, target, which or steps change is computed afresh. Forwards are counted with a hook
on the encoder (the real model runs)."""
from __future__ import annotations

import pytest

from engine.model.loaded_model import LoadedModel
from engine.probes.attribution.methods import attribute
from explorer.services import Services
from explorer.why import actions
from support.forward_counting import Forwards, pinned_services, tiny_loaded

pytestmark = pytest.mark.usefixtures("one_thread")

MASKED = "the cat [MASK] on the mat."




def _loaded(tokenizer, seed: int = 0) -> LoadedModel:
    return tiny_loaded(tokenizer, ("mlm",), seed)


@pytest.fixture()
def services(tiny_tokenizer) -> Services:
    return pinned_services(tiny_tokenizer, _loaded(tiny_tokenizer))


def _explain(services: Services, **changes) -> tuple:
    form = dict(task="fill_mask", text=MASKED, text_pair="", target="dog", which=1, method="integrated_gradients",
                score="logit", steps=8)
    return actions.explain_prediction(services, "default", **{**form, **changes})


def test_the_same_request_again_runs_no_model_and_shows_the_same(services: Services) -> None:
    forwards = Forwards(services.model("default"))
    first = _explain(services)
    ran = forwards.count
    assert ran >= 2                                        # the input, the baseline, the integration steps
    assert _explain(services) == first and forwards.count == ran
    expected = attribute(services.model("default"), "fill_mask", MASKED, target="dog", which=0, n_steps=8)
    assert first[3] == expected.as_dict()


@pytest.mark.parametrize("change", [dict(method="gradient_x_input"), dict(score="probability"), dict(target="cat"),
                                    dict(steps=9), dict(text="the [MASK] sat on the mat.")])
def test_every_setting_of_the_computation_runs_it_again(services: Services, change: dict) -> None:
    forwards = Forwards(services.model("default"))
    _explain(services)
    ran = forwards.count
    numbers = _explain(services, **change)[3]
    assert forwards.count > ran
    form = dict(target="dog", method="integrated_gradients", score="logit", n_steps=8)
    form.update({"n_steps" if k == "steps" else k: v for k, v in change.items() if k != "text"})
    assert numbers == attribute(services.model("default"), "fill_mask", change.get("text", MASKED), which=0,
                                **form).as_dict()


def test_a_new_model_object_runs_it_again(services: Services, tiny_tokenizer) -> None:
    _explain(services)
    services.registry().pin("default", _loaded(tiny_tokenizer, seed=1))
    forwards = Forwards(services.model("default"))
    _explain(services)
    assert forwards.count >= 2
