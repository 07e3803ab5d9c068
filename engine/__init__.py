"""BERT Explorer's engine: model, tokenizer, checkpoints, training. No UI code here.

Names are imported lazily, so ``import engine.tokenizer`` does not pay for torch.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BertConfig": "config", "PRESETS": "config", "preset": "config",
    "BertModel": "model", "BertWithHeads": "heads", "HEADS": "heads",
    "BertForwardOutput": "outputs", "WordPieceTokenizer": "tokenizer",
    "LoadedModel": "checkpoints", "load": "checkpoints", "save": "checkpoints",
    "Trainer": "trainer", "TrainingConfig": "training_config", "TrainingDiverged": "trainer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
