"""BERT Explorer's engine: a BERT library with no UI code.

Sub-packages: ``model`` (config, encoder, heads, outputs), ``text`` (tokenizer, corpus),
``data`` (masking, pretraining instances, task features), ``checkpoints`` (Hugging Face
layout, key mapping, hub), ``training`` (jobs, trainer, tasks, worker), ``probes`` (what the
explorer asks of a model). ``python -m engine.pretrain`` and ``python -m engine.finetune``
are the command lines. See docs/ARCHITECTURE.md.

Names are imported lazily, so ``import engine.text.tokenizer`` does not pay for torch.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BertConfig": "model.config", "PRESETS": "model.config", "preset": "model.config",
    "BertModel": "model.encoder", "BertWithHeads": "model.heads", "HEADS": "model.head_specs",
    "EncoderOutput": "model.outputs", "HeadsOutput": "model.outputs", "WordPieceTokenizer": "text.tokenizer",
    "LoadedModel": "model.loaded_model", "load": "checkpoints.hf_format", "save": "checkpoints.hf_format",
    "Trainer": "training.loop.trainer", "TrainingConfig": "training.loop.config",
    "TrainingDiverged": "training.loop.divergence",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
