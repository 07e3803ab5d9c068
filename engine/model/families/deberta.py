"""DeBERTa-v2 and DeBERTa-v3 (He et al., 2021, 2023; ``model_type`` "deberta-v2"): layers that are not BERT's, built
by ``engine/model/deberta_model.py`` (``Family.build_base``) under transformers' names below ``deberta.``; its own
hyper-parameters (relative attention, position buckets, ``pos_att_type``, ...) travel in
``BertConfig.family_options``, read and checked by ``engine/model/deberta_options.py``.

Heads read: masked LM in both of transformers' layouts (``cls.predictions.*``, the default "legacy" one, which is
BERT's; and ``lm_predictions.lm_head.*``, DeBERTa-v3's own files), written back in the first; QA; token
classification; sequence classification and multiple choice (its ``ContextPooler`` at the top-level ``pooler.``,
then ``classifier``). DeBERTa-v3's replaced-token detection (``mask_predictions``) is not read: its keys are dropped,
as is the absolute position table its files hold when ``position_biased_input`` is false (``unused_keys``).

Refused with a sentence: DeBERTa v1 (``model_type`` "deberta": no family reads it), ``pos_att_type`` other than
c2p / p2c, an ``attention_head_size`` or ``pooler_hidden_size`` that is not the hidden width's, and a non-legacy
masked-LM head with ``embedding_size`` != ``hidden_size`` (transformers cannot run it either).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from engine.model.config import BertConfig
from engine.model.deberta_model import build_deberta
from engine.model.deberta_options import DebertaOptions
from engine.model.families.family import Family, Renames, bert_named_config, bert_named_dict

RENAMES = Renames((
    ("cls.predictions.", "cls.predictions."),       # the masked-LM head, "legacy" layout: BERT's (export writes it)
    ("lm_predictions.lm_head.dense.", "cls.predictions.transform.dense."),      # DeBERTa-v3's own layout
    ("lm_predictions.lm_head.LayerNorm.", "cls.predictions.transform.LayerNorm."),
    ("lm_predictions.lm_head.bias", "cls.predictions.bias"),
    ("mask_predictions.", None),                    # replaced-token detection: not read yet
    ("pooler.", "bert.pooler."),                    # ContextPooler: top level in transformers, in the base here
    ("deberta.", "bert."),
))

# transformers' DebertaV2Config defaults for what a config.json leaves out
DEFAULTS = {"vocab_size": 128100, "hidden_size": 1536, "num_hidden_layers": 24, "num_attention_heads": 24,
            "intermediate_size": 6144, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 0,
            "layer_norm_eps": 1e-7}


def _same_width(data: dict[str, Any], name: str, width: Any, of: str) -> None:
    value = data.get(name)
    if value is not None and value != width:
        raise ValueError(f"this DeBERTa's {name} ({str(value)[:40]}) is not {of} ({width}); this app reads "
                         f"DeBERTas whose {name} is {of}")


def _config(data: dict[str, Any]) -> BertConfig:
    data = {**DEFAULTS, **data}
    hidden = data["hidden_size"]
    size = data.get("embedding_size") or hidden
    legacy = data.get("legacy", True)
    if not isinstance(legacy, bool):
        raise ValueError(f"DeBERTa's legacy must be true or false, got {str(legacy)[:60]!r}")
    if not legacy and size != hidden:
        raise ValueError("this DeBERTa's masked-LM head is not the legacy one (legacy false) and its embedding_size "
                         "differs from hidden_size, a head transformers cannot run; this app reads it with "
                         "embedding_size equal to hidden_size")
    config = bert_named_config(data, DEBERTA, embedding_size=None if size == hidden else size,
                               classifier_dropout=data.get("cls_dropout"))
    _same_width(data, "attention_head_size", config.head_size, "hidden_size / num_attention_heads")
    _same_width(data, "pooler_hidden_size", config.hidden_size, "hidden_size")
    options = DebertaOptions.read(data, config.max_position_embeddings, config.hidden_size)
    return config.replace(family_options=options.to_hf())


def _to_hf(config: BertConfig) -> dict[str, Any]:
    options = DebertaOptions.read(config.family_options, config.max_position_embeddings, config.hidden_size)
    data = bert_named_dict(config, DEBERTA, **options.to_hf(), embedding_size=config.embedding_width,
                           pooler_hidden_size=config.hidden_size, legacy=True)   # the head is written "legacy"
    data.pop("position_embedding_type", None)
    dropout = data.pop("classifier_dropout", None)
    if dropout is not None:
        data["cls_dropout"] = dropout
    return data


def _unused(config: BertConfig) -> tuple[str, ...]:
    """The absolute position table DeBERTa's files may hold when ``position_biased_input`` is false (transformers
    ignores it too): under ``deberta.`` and in a bare base model."""
    if config.family_options.get("position_biased_input", True):
        return ()
    return ("deberta.embeddings.position_embeddings.", "embeddings.position_embeddings.")


@dataclass(frozen=True)
class DebertaFamily(Family):
    """A ``Family`` whose bare base model (``DebertaV2Model``) has no pooler: transformers keeps DeBERTa's
    ``ContextPooler`` in the task classes, so a base model alone is written without it."""

    def state_to_theirs(self, state: dict[str, torch.Tensor], bare: bool) -> dict[str, torch.Tensor]:
        """The shared layout in DeBERTa's, the pooler left out of a bare base model."""
        out = super().state_to_theirs(state, bare)
        return {k: v for k, v in out.items() if not (bare and k.startswith("pooler."))}


DEBERTA = DebertaFamily(
    name="DeBERTa-v2/v3", model_types=("deberta-v2",), class_stem="DebertaV2", config_from_hf=_config,
    config_to_hf=_to_hf, renames=RENAMES, base_prefix="deberta.",
    classes=("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "ForSequenceClassification",
             "ForMultipleChoice", "Model"),
    build_base=build_deberta, unused_keys=_unused)
