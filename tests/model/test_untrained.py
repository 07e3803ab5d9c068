"""engine/model/untrained.py: the untrained twin has the model's shape, heads and tokenizer, fresh seeded
weights, and leaves the caller's random state alone."""
from __future__ import annotations

import torch

from engine.model.loaded_model import LoadedModel
from engine.model.untrained import untrained_twin
from support.probing_helpers import tiny_model


def test_the_twin_has_the_shape_heads_and_tokenizer_but_fresh_weights(tiny_tokenizer) -> None:
    trained = tiny_model(7)
    loaded = LoadedModel(trained, tiny_tokenizer, trained.config, "tiny")
    twin = untrained_twin(loaded)
    assert twin.config == loaded.config and twin.heads == loaded.heads and twin.tokenizer is tiny_tokenizer
    assert twin.model.has_pooler == trained.has_pooler and not twin.model.training
    ours, theirs = dict(trained.named_parameters()), dict(twin.model.named_parameters())
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}
    word = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(ours[word], theirs[word])
    assert abs(theirs[word].std().item() - trained.config.initializer_range) < 0.2 * trained.config.initializer_range


def test_one_seed_gives_one_twin_and_the_global_random_state_is_kept(tiny_tokenizer) -> None:
    trained = tiny_model(7)
    loaded = LoadedModel(trained, tiny_tokenizer, trained.config, "tiny")
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    first, second, other = untrained_twin(loaded), untrained_twin(loaded), untrained_twin(loaded, seed=1)
    assert torch.equal(torch.random.get_rng_state(), before)
    for (name, a), b, c in zip(first.model.state_dict().items(), second.model.state_dict().values(),
                               other.model.state_dict().values()):
        assert torch.equal(a, b), name
    word = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(first.model.state_dict()[word], other.model.state_dict()[word])
