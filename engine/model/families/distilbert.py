"""DistilBERT (Sanh et al., 2019): BERT's post-LN layers with other names (``q_lin``, ``sa_layer_norm``,
``ffn.lin1``, ...), six of them by default, no segment embeddings (``type_vocab_size`` 0), no pooler, and its own
``config.json`` field names (``dim``, ``n_layers``, ``hidden_dim``, ...). Its sequence-classification and
multiple-choice heads are its own (``family_heads.first_token_scorer``): ``pre_classifier`` (H -> H), ReLU and
dropout (``seq_classif_dropout``) on the first token, then ``classifier``; ``pre_classifier`` is read as a part of
the head that owns ``classifier``."""
from __future__ import annotations

from typing import Any

from engine.model.config import BertConfig
from engine.model.families.family import Family, Renames
from engine.model.family_heads import first_token_scorer
from engine.model.head_modules import classifier_dropout

LAYER, OURS = "distilbert.transformer.layer.{n}.", "bert.encoder.layer.{n}."
RENAMES = Renames((
    (LAYER + "attention.q_lin.", OURS + "attention.self.query."),
    (LAYER + "attention.k_lin.", OURS + "attention.self.key."),
    (LAYER + "attention.v_lin.", OURS + "attention.self.value."),
    (LAYER + "attention.out_lin.", OURS + "attention.output.dense."),
    (LAYER + "sa_layer_norm.", OURS + "attention.output.LayerNorm."),
    (LAYER + "ffn.lin1.", OURS + "intermediate.dense."),
    (LAYER + "ffn.lin2.", OURS + "output.dense."),
    (LAYER + "output_layer_norm.", OURS + "output.LayerNorm."),
    ("distilbert.embeddings.", "bert.embeddings."),
    ("vocab_transform.", "cls.predictions.transform.dense."),
    ("vocab_layer_norm.", "cls.predictions.transform.LayerNorm."),
    ("vocab_projector.weight", "cls.predictions.decoder.weight"),     # tied to the word embeddings
    ("vocab_projector.bias", "cls.predictions.bias"),
    ("pre_classifier.", "classifier.pre_classifier."),               # key_mapping: classifier -> the head's own
))
# DistilBERT's config.json name -> BertConfig's
NAMES = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
         "hidden_dim": "intermediate_size", "activation": "hidden_act", "dropout": "hidden_dropout_prob",
         "attention_dropout": "attention_probs_dropout_prob", "seq_classif_dropout": "classifier_dropout"}
SHARED = ("vocab_size", "max_position_embeddings", "initializer_range", "pad_token_id", "id2label", "num_labels")


def _config(data: dict[str, Any]) -> BertConfig:
    if data.get("sinusoidal_pos_embds"):
        raise ValueError("this DistilBERT uses fixed sinusoidal position embeddings (sinusoidal_pos_embds), "
                         "which this app does not read yet")
    shared = {ours: data[theirs] for theirs, ours in NAMES.items() if theirs in data}
    shared.update({name: data[name] for name in SHARED if name in data})
    shared.update(model_type="bert", type_vocab_size=0, layer_norm_eps=1e-12,
                  architectures=DISTILBERT.architectures_to_ours(data.get("architectures")))
    return BertConfig.from_dict(shared).replace(model_type="distilbert")


def _to_hf(config: BertConfig) -> dict[str, Any]:
    data = config.to_dict()
    out: dict[str, Any] = {theirs: data[ours] for theirs, ours in NAMES.items() if data.get(ours) is not None}
    out.update({name: data[name] for name in SHARED if name in data})
    out.update(model_type="distilbert", sinusoidal_pos_embds=False, tie_word_embeddings=True,
               label2id=data["label2id"], id2label=data["id2label"])
    if config.architectures is not None:
        out["architectures"] = DISTILBERT.architectures_to_theirs(config.architectures)
    return out


DISTILBERT = Family(
    name="DistilBERT", model_types=("distilbert",), class_stem="DistilBert", config_from_hf=_config,
    config_to_hf=_to_hf, renames=RENAMES, base_prefix="distilbert.",
    classes=("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "ForSequenceClassification",
             "ForMultipleChoice", "Model"),
    heads=tuple(first_token_scorer(head, "pre_classifier", "relu", classifier_dropout)
                for head in ("classifier", "multiple_choice")))
