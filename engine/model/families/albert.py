"""ALBERT (Lan et al., 2020): embeddings of width ``embedding_size`` projected to the hidden width
(``embedding_hidden_mapping_in``), and layers that share their weights: ``num_hidden_groups`` groups, layer i
running group ``i // (num_hidden_layers / num_hidden_groups)`` (``BertEncoder.order``). Each layer is BERT's
post-LN layer under other names (``attention.dense``, ``ffn``, ``ffn_output``, ``full_layer_layer_norm``). Its
masked-LM head maps to E (``predictions``). Its sentence-order head (``sop_classifier.classifier``, dropout before
it) is its own, in the slot of BERT's next-sentence head (``family_heads.SENTENCE_ORDER``): ``AlbertForPreTraining``
is ``BertForPreTraining``'s layout. Groups of several inner layers (``inner_group_num`` > 1) are refused."""
from __future__ import annotations

from typing import Any

from engine.model.config import BertConfig
from engine.model.families.family import Family, Renames, bert_named_config, bert_named_dict
from engine.model.family_heads import SENTENCE_ORDER

LAYER, OURS = "albert.encoder.albert_layer_groups.{n}.albert_layers.0.", "bert.encoder.layer.{n}."
RENAMES = Renames((
    (LAYER + "attention.query.", OURS + "attention.self.query."),
    (LAYER + "attention.key.", OURS + "attention.self.key."),
    (LAYER + "attention.value.", OURS + "attention.self.value."),
    (LAYER + "attention.dense.", OURS + "attention.output.dense."),
    (LAYER + "attention.LayerNorm.", OURS + "attention.output.LayerNorm."),
    (LAYER + "ffn.", OURS + "intermediate.dense."),
    (LAYER + "ffn_output.", OURS + "output.dense."),
    (LAYER + "full_layer_layer_norm.", OURS + "output.LayerNorm."),
    ("albert.encoder.embedding_hidden_mapping_in.", "bert.embeddings_project."),
    ("albert.pooler.", "bert.pooler.dense."),
    ("albert.", "bert."),
    ("predictions.decoder.bias", None),                               # the same tensor as predictions.bias
    ("predictions.decoder.weight", "cls.predictions.decoder.weight"),  # tied to the word embeddings
    ("predictions.dense.", "cls.predictions.transform.dense."),
    ("predictions.LayerNorm.", "cls.predictions.transform.LayerNorm."),
    ("predictions.bias", "cls.predictions.bias"),
    ("sop_classifier.classifier.", "cls.seq_relationship."),          # sentence order, in the NSP head's place
))


def _config(data: dict[str, Any]) -> BertConfig:
    if data.get("inner_group_num", 1) != 1:
        raise ValueError(f"this ALBERT has {data.get('inner_group_num')} layers in each group (inner_group_num); "
                         "this app reads ALBERTs with one")
    defaults = {"hidden_act": "gelu_new", "embedding_size": 128, "hidden_size": 4096, "num_attention_heads": 64,
                "intermediate_size": 16384, "vocab_size": 30000}
    data = {**defaults, **data}
    if data.get("classifier_dropout_prob") is not None and data.get("classifier_dropout") is None:
        data["classifier_dropout"] = data["classifier_dropout_prob"]
    return bert_named_config(data, ALBERT, embedding_size=data["embedding_size"],
                             num_hidden_groups=data.get("num_hidden_groups", 1))


def _to_hf(config: BertConfig) -> dict[str, Any]:
    return bert_named_dict(config, ALBERT, embedding_size=config.embedding_width, inner_group_num=1,
                           num_hidden_groups=config.num_hidden_groups or config.num_hidden_layers,
                           classifier_dropout_prob=config.classifier_dropout)


ALBERT = Family(name="ALBERT", model_types=("albert",), class_stem="Albert", config_from_hf=_config,
                config_to_hf=_to_hf, renames=RENAMES, base_prefix="albert.",
                classes=("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "ForSequenceClassification",
                         "ForMultipleChoice", "ForPreTraining", "Model"), heads=(SENTENCE_ORDER,))
