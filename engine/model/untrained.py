"""An untrained twin of a model: the same shape, heads and tokenizer, weights freshly initialised.

What training did is easiest to see beside the same network before it (the Compare tab's first example, the
syntax bench's baseline). The weights are drawn with BERT's initialisation (``BertWithHeads`` builds them
that way) from a seeded generator, so one seed always gives the same twin, and the caller's random state is
left as it was.
"""
from __future__ import annotations

import torch

from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads

UNTRAINED_SEED = 0


def untrained_twin(loaded: LoadedModel, seed: int = UNTRAINED_SEED) -> LoadedModel:
    """A freshly initialised model with ``loaded``'s config, heads (and pooler) and tokenizer, in eval mode on
    ``loaded``'s device; the global random state is restored afterwards."""
    device = next(loaded.model.parameters()).device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertWithHeads(loaded.config, heads=loaded.heads,
                              add_pooling_layer=loaded.model.has_pooler)
    model.to(device).eval()
    return LoadedModel(model, loaded.tokenizer, loaded.config, f"untrained twin of {loaded.source} (seed {seed})")
