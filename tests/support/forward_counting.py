"""Counting the model's forward runs, for the tests that say a view change runs no model (the forward cache,
the kept Fill-mask, QA and Why results): a tiny random model pinned as ``default``, and a hook on its encoder."""
from __future__ import annotations

from collections.abc import Sequence

from conftest import tiny_config
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.reference import randomize_


class Forwards:
    """Counts the encoder's forward calls of one model (a forward hook: the real model runs)."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.count = 0
        self.handle = loaded.model.bert.register_forward_hook(lambda *_: self._seen())

    def _seen(self) -> None:
        self.count += 1


def tiny_loaded(tokenizer: WordPieceTokenizer, heads: Sequence[str] = ("mlm",), seed: int = 0) -> LoadedModel:
    """A tiny model with ``heads`` and random weights from ``seed`` (a new object each call: a reload)."""
    model = randomize_(BertWithHeads(tiny_config(), heads=tuple(heads)), seed, scale=0.3).eval()
    return LoadedModel(model, tokenizer, model.config, f"tiny model {seed}")


def pinned_services(tokenizer: WordPieceTokenizer, loaded: LoadedModel) -> Services:
    """Services whose ``default`` is ``loaded`` (no model folder, no runs)."""
    registry = ModelRegistry(default_dir=None)
    registry.pin("default", loaded)
    return Services(tokenizer=tokenizer, models=registry)
