"""``engine.cancellation``: a stop check installed by the caller ends the long probes between steps with
``Cancelled``; without one they run to the end; each thread sees its own check; ``running()`` counts the work."""
from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable

import pytest

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.probes.attribution import methods as attribution
from engine.probes.attention.maps import attention_over_checkpoints
from engine.probes.representations.neighbours import build_index
from support.probing_helpers import tiny_model

CORPUS = ["the cat sat on the mat ."] * 10
MASKED = "the cat [MASK] on the mat."


@pytest.fixture(scope="module")
def tiny(tiny_tokenizer) -> LoadedModel:
    model = tiny_model(0)
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny")


def after(calls: int) -> tuple[list[int], Callable[[], bool]]:
    """A stop check that says stop from its ``calls``-th call on; the list counts the calls."""
    seen = [0]

    def should_stop() -> bool:
        seen[0] += 1
        return seen[0] >= calls

    return seen, should_stop


def test_check_does_nothing_outside_a_stoppable_block_and_counts_the_work() -> None:
    cancellation.check()                                       # the engine from Python runs to the end
    assert cancellation.running() == 0
    with cancellation.stoppable(lambda: False):
        cancellation.check()
        assert cancellation.running() == 1
        with pytest.raises(cancellation.Cancelled):
            with cancellation.stoppable(lambda: True):
                assert cancellation.running() == 2
                cancellation.check()
        assert cancellation.running() == 1
        cancellation.check()                                   # the outer check is back
    assert cancellation.running() == 0


def test_each_thread_sees_its_own_check() -> None:
    outcomes: dict[str, str] = {}

    def probe(name: str) -> None:
        try:
            cancellation.check()
            outcomes[name] = "ran"
        except cancellation.Cancelled:
            outcomes[name] = "stopped"

    with cancellation.stoppable(lambda: True):
        inherited = threading.Thread(target=contextvars.copy_context().run, args=(probe, "copied context"))
        plain = threading.Thread(target=probe, args=("fresh thread",))
        for thread in (inherited, plain):
            thread.start()
            thread.join()
    assert outcomes == {"copied context": "stopped", "fresh thread": "ran"}


def test_the_neighbours_index_stops_between_batches(tiny) -> None:
    seen, should_stop = after(3)
    with cancellation.stoppable(should_stop), pytest.raises(cancellation.Cancelled):
        build_index(tiny, CORPUS, layer=1, batch_size=2)        # 5 batches; stopped before the third
    assert seen[0] == 3
    assert len(build_index(tiny, CORPUS, layer=1, batch_size=2).sentences) == 10   # no check: all of it


def test_integrated_gradients_stop_between_integration_batches(tiny, monkeypatch) -> None:
    monkeypatch.setattr(attribution, "BATCH_TOKENS", 1)          # one integration point per forward pass
    forwards = [0]
    real_pick = attribution.pick

    def counted(*args, **kwargs):
        forwards[0] += 1
        return real_pick(*args, **kwargs)

    monkeypatch.setattr(attribution, "pick", counted)
    seen, should_stop = after(6)
    with cancellation.stoppable(should_stop), pytest.raises(cancellation.Cancelled):
        attribution.attribute(tiny, "fill_mask", MASKED, n_steps=200)
    assert forwards[0] == 5 and seen[0] == 6                    # 5 of ~200 forward passes, then it stopped
    forwards[0] = 0
    assert len(attribution.attribute(tiny, "fill_mask", MASKED, n_steps=20).attributions) > 0
    assert forwards[0] > 20                                      # without a check it ran every point


def test_the_over_training_views_stop_between_checkpoints(tiny) -> None:
    loaded: list[int] = []

    def models():
        for step in range(5):
            loaded.append(step)
            yield f"step-{step:06d}", tiny

    seen, should_stop = after(3)
    with cancellation.stoppable(should_stop), pytest.raises(cancellation.Cancelled):
        attention_over_checkpoints(models(), "the cat sat", None, 0, 0)
    assert loaded == [0, 1] and seen[0] == 3                    # the third checkpoint was never loaded
