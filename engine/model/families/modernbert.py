"""ModernBERT (Warner et al., 2024): not BERT's layers (``engine/model/modernbert_model.py`` builds them: rotary
positions, local and global attention, GeGLU, pre-LN), under ``model.``; its own hyper-parameters live in
``BertConfig.family_options`` (``engine/model/modernbert_options.py``).

Every ModernBERT task class keeps its prediction layer as ``head`` and (but the masked LM) its last layer as
``classifier``, so whose they are depends on the class ``config.json`` names: ``head`` is the masked-LM head's
transform (``ModernBertForMaskedLM``, beside ``decoder``), the QA or token classifier's own prediction head, or the
sequence classifier's pooler (which pools, then runs it). A class this app does not read (multiple choice) loads as
its bare model, its head's keys listed as ignored. Export writes one task class: two heads would both be ``head``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from engine.model.config import SUPPORTED_ACTIVATIONS, BertConfig
from engine.model.families.family import Family, Renames
from engine.model.modernbert_heads import MODERNBERT_HEADS
from engine.model.modernbert_model import ModernBertModel
from engine.model.modernbert_options import ModernBertOptions, modernbert_options

BASE = (("model.", "bert."),)
# transformers' keys of each task class's head -> ours (our head's module path, see engine/model/modernbert_heads.py)
HEAD_KEYS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "BertForSequenceClassification": (("head.", "bert.pooler."),),        # classifier. stays classifier.
    "BertForMaskedLM": (("head.", "cls.predictions.transform."),
                        ("decoder.weight", "cls.predictions.decoder.weight"),  # tied to the token embeddings
                        ("decoder.bias", "cls.predictions.bias")),
    "BertForQuestionAnswering": (("head.", "qa_outputs.transform."), ("classifier.", "qa_outputs.")),
    "BertForTokenClassification": (("head.", "classifier.transform."),),  # key_mapping: classifier -> ours
}
NOT_READ = (("head.", None), ("classifier.", None), ("decoder.", None))
# both ways (export, and messages naming a key as the family's files do): each of ours has one name of theirs
RENAMES = Renames(tuple(pair for pairs in HEAD_KEYS.values() for pair in pairs) + BASE)
# config.json's names of the fields BertConfig has under BERT's names, with ModernBertConfig's defaults
SHARED = {"vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
          "num_attention_heads": 12, "max_position_embeddings": 8192, "initializer_range": 0.02,
          "pad_token_id": 50283}
RENAMED = {"hidden_activation": ("hidden_act", "gelu"), "norm_eps": ("layer_norm_eps", 1e-5),
           "mlp_dropout": ("hidden_dropout_prob", 0.0), "attention_dropout": ("attention_probs_dropout_prob", 0.0),
           "classifier_dropout": ("classifier_dropout", 0.0)}   # after a task head's prediction head


def _head_class(state: dict[str, torch.Tensor], architectures: list[str] | None) -> str | None:
    """Which read class the checkpoint's ``head`` / ``classifier`` keys belong to (None: none read)."""
    if architectures is not None:
        return next((name for name in HEAD_KEYS if name in architectures), None)
    if any(k.startswith("decoder.") for k in state):
        return "BertForMaskedLM"
    return "BertForSequenceClassification" if any(k.startswith("classifier.") for k in state) else None


@dataclass(frozen=True)
class ModernBertFamily(Family):
    """A ``Family`` whose head keys are renamed by the class ``config.json`` names (see the module's docstring)."""

    def state_to_ours(self, state: dict[str, torch.Tensor], architectures: list[str] | None = None
                      ) -> tuple[dict[str, torch.Tensor], list[str]]:
        """transformers' layout in ours, the head keys as the checkpoint's class has them; the keys dropped."""
        kind = _head_class(state, architectures)
        renames = Renames((HEAD_KEYS[kind] if kind is not None else NOT_READ) + BASE)
        return Family.state_to_ours(replace(self, renames=renames), state)

    def state_to_theirs(self, state: dict[str, torch.Tensor], bare: bool) -> dict[str, torch.Tensor]:
        """Ours in transformers' layout; ``ValueError`` when two heads would both be written as ``head``."""
        out = Family.state_to_theirs(self, state, bare)
        if bare:                            # ModernBertModel has no head: a pooler's prediction head stays out
            return {k: v for k, v in out.items() if not k.startswith("head.")}
        if len(out) < len(state):
            raise ValueError("a ModernBERT checkpoint holds one task head (transformers calls each one's prediction "
                             "layer 'head'); export one class: name it in architectures")
        return out


def _config(data: dict[str, Any]) -> BertConfig:
    if data.get("tie_word_embeddings", True) is not True:
        raise ValueError("this ModernBERT's decoder is not tied to its token embeddings (tie_word_embeddings), "
                         "which this app does not read; it reads ModernBERTs with tied embeddings")
    activation = data.get("hidden_activation", "gelu")
    if activation not in SUPPORTED_ACTIVATIONS:
        raise ValueError(f"ModernBERT's hidden_activation {str(activation)[:60]!r} is not one this app computes; "
                         f"supported: {', '.join(SUPPORTED_ACTIVATIONS)}")
    shared: dict[str, Any] = {name: data.get(name, default) for name, default in SHARED.items()}
    shared.update({ours: data.get(theirs, default) for theirs, (ours, default) in RENAMED.items()})
    shared.update({name: data[name] for name in ("id2label", "num_labels") if name in data})
    shared.update(model_type="bert", type_vocab_size=0,
                  architectures=MODERNBERT.architectures_to_ours(data.get("architectures")))
    config = BertConfig.from_dict(shared)
    head_dim = data.get("head_dim")
    if head_dim is not None and head_dim != config.head_size:
        raise ValueError(f"this ModernBERT's head_dim ({str(head_dim)[:20]}) is not hidden_size / "
                         f"num_attention_heads ({config.head_size}), which this app does not read")
    options = ModernBertOptions.read(data, config.num_hidden_layers)
    return config.replace(model_type="modernbert", family_options=options.family_options())


def _to_hf(config: BertConfig) -> dict[str, Any]:
    data = config.to_dict()
    out: dict[str, Any] = {name: data[name] for name in SHARED}
    out.update({theirs: data[ours] for theirs, (ours, _) in RENAMED.items()})
    out["classifier_dropout"] = config.classifier_dropout or 0.0        # ModernBERT's heads: no fallback
    out.update(model_type="modernbert", tie_word_embeddings=True, id2label=data["id2label"],
               label2id=data["label2id"], **modernbert_options(config).to_hf())
    if config.architectures is not None:
        out["architectures"] = MODERNBERT.architectures_to_theirs(config.architectures)
    return out


def _reach(config: BertConfig) -> tuple[int | None, ...]:
    """Per layer: the window's half-width on a local layer, None on a global one."""
    options = modernbert_options(config)
    return tuple(None if options.is_global(i) else options.window for i in range(config.num_hidden_layers))


MODERNBERT = ModernBertFamily(
    name="ModernBERT", model_types=("modernbert",), class_stem="ModernBert", config_from_hf=_config,
    config_to_hf=_to_hf, renames=RENAMES, base_prefix="model.",
    classes=("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "ForSequenceClassification", "Model"),
    build_base=ModernBertModel, heads=MODERNBERT_HEADS, attention_reach=_reach)
