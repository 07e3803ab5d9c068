"""RoBERTa (Liu et al., 2019) and XLM-R (Conneau et al., 2020): BERT's layers under ``roberta.``; what differs is
the position embeddings, counted from ``pad_token_id + 1`` with padding skipped (``position_offset``), a single
segment (``type_vocab_size`` 1), and the masked-LM head's names (``lm_head``). Its sequence-classification head is
its own (``family_heads.first_token_classifier``: ``classifier.dense``, tanh, ``classifier.out_proj`` on the first
token, no pooler); multiple choice is BERT's (the pooler, then ``classifier``)."""
from __future__ import annotations

from typing import Any

from engine.model.config import BertConfig
from engine.model.families.family import Family, Renames, bert_named_config, bert_named_dict
from engine.model.family_heads import first_token_classifier

RENAMES = Renames((
    ("lm_head.dense.", "cls.predictions.transform.dense."),
    ("lm_head.layer_norm.", "cls.predictions.transform.LayerNorm."),
    ("lm_head.decoder.weight", "cls.predictions.decoder.weight"),     # tied to the word embeddings
    ("lm_head.decoder.bias", None),                                   # the same tensor as lm_head.bias
    ("lm_head.bias", "cls.predictions.bias"),
    ("roberta.", "bert."),
))


def _config(data: dict[str, Any]) -> BertConfig:
    data = {"pad_token_id": 1, "type_vocab_size": 1, "layer_norm_eps": 1e-5, **data}
    config = bert_named_config(data, ROBERTA if data.get("model_type") == "roberta" else XLM_R)
    if config.pad_token_id + 1 >= config.max_position_embeddings:
        raise ValueError(f"pad_token_id ({config.pad_token_id}) leaves no positions: this family counts positions "
                         f"from pad_token_id + 1, and max_position_embeddings is {config.max_position_embeddings}")
    return config.replace(position_offset=config.pad_token_id + 1)


def _to_hf(config: BertConfig) -> dict[str, Any]:
    family = ROBERTA if config.model_type == "roberta" else XLM_R
    return bert_named_dict(config, family, bos_token_id=0, eos_token_id=2)


CLASSES = ("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "ForSequenceClassification",
           "ForMultipleChoice", "Model")
OWN_HEADS = (first_token_classifier("tanh"),)          # its sequence classifier
ROBERTA = Family(name="RoBERTa", model_types=("roberta",), class_stem="Roberta", config_from_hf=_config,
                 config_to_hf=_to_hf, renames=RENAMES, base_prefix="roberta.", classes=CLASSES, heads=OWN_HEADS)
XLM_R = Family(name="XLM-R", model_types=("xlm-roberta",), class_stem="XLMRoberta", config_from_hf=_config,
               config_to_hf=_to_hf, renames=RENAMES, base_prefix="roberta.", classes=CLASSES, heads=OWN_HEADS)
