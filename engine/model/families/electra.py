"""ELECTRA (Clark et al., 2020): BERT's layers under ``electra.``, embeddings of width ``embedding_size`` projected
to the hidden width (``embeddings_project``, present when the two differ), no pooler. Its generator's masked-LM
head (``generator_predictions``: dense to E, GELU, LayerNorm; ``generator_lm_head`` tied to the embeddings) is
read as the shared one. Heads of its own (``engine.model.family_heads``): the discriminator's replaced-token head
(``discriminator_predictions``, ``ElectraForPreTraining``), the sequence classifier (``classifier.dense``, GELU,
``classifier.out_proj`` on the first token, no pooler), and multiple choice through its sequence summary
(``sequence_summary.summary``, read as a part of the head that owns ``classifier``), in transformers' default
summary only (the first token, projected, GELU, dropout 0.1): another is refused with a sentence. A discriminator
pretrained here (objective rtd) keeps its generator as a head too (``generator.``, sized by ``config.json``'s
``generator_hidden_size``: ``engine.model.electra_generator``)."""
from __future__ import annotations

from typing import Any

from engine.model.config import BertConfig
from engine.model.electra_generator import GENERATOR, GENERATOR_OPTION
from engine.model.families.family import Family, Renames, bert_named_config, bert_named_dict
from engine.model.family_heads import (
    REPLACED_TOKENS, electra_summary_dropout, first_token_classifier, first_token_scorer,
)

RENAMES = Renames((
    ("electra.embeddings_project.", "bert.embeddings_project."),
    ("electra.", "bert."),
    ("generator_predictions.dense.", "cls.predictions.transform.dense."),
    ("generator_predictions.LayerNorm.", "cls.predictions.transform.LayerNorm."),
    ("generator_lm_head.weight", "cls.predictions.decoder.weight"),   # tied to the word embeddings
    ("generator_lm_head.bias", "cls.predictions.bias"),
    ("sequence_summary.summary.", "classifier.summary."),            # key_mapping: classifier -> the head's own
))
# transformers' sequence summary (multiple choice): the defaults, the only summary read
SUMMARY = (("summary_type", "first"), ("summary_use_proj", True), ("summary_activation", "gelu"),
           ("summary_last_dropout", 0.1), ("summary_proj_to_labels", False), ("summary_first_dropout", 0))


def _check_summary(data: dict[str, Any]) -> None:
    """A ``ValueError`` sentence for a multiple-choice ELECTRA whose sequence summary is not the default."""
    names = data.get("architectures")
    if not isinstance(names, list) or "ElectraForMultipleChoice" not in names:
        return
    odd = [name for name, default in SUMMARY if name in data and (data[name] or 0) != (default or 0)]  # None = 0
    if odd:
        raise ValueError(f"this ELECTRA multiple-choice model's sequence summary is not transformers' default "
                         f"({', '.join(odd)}); this app reads the default: the first token, projected, GELU, "
                         "dropout 0.1")


def _config(data: dict[str, Any]) -> BertConfig:
    data = {"hidden_size": 256, "embedding_size": 128, "num_attention_heads": 4, "intermediate_size": 1024, **data}
    hidden, size = data["hidden_size"], data["embedding_size"]
    if data.get("hidden_act", "gelu") != "gelu":
        raise ValueError("this ELECTRA's hidden_act is not GELU, which its generator head always uses; "
                         "this app reads ELECTRAs with hidden_act 'gelu'")
    _check_summary(data)
    options = {GENERATOR_OPTION: data[GENERATOR_OPTION]} if GENERATOR_OPTION in data else {}   # its generator
    return bert_named_config(data, ELECTRA,
                             embedding_size=None if size == hidden else size, family_options=options)


def _to_hf(config: BertConfig) -> dict[str, Any]:
    return bert_named_dict(config, ELECTRA, embedding_size=config.embedding_width, **config.family_options)


ELECTRA = Family(
    name="ELECTRA", model_types=("electra",), class_stem="Electra", config_from_hf=_config, config_to_hf=_to_hf,
    renames=RENAMES, base_prefix="electra.",
    classes=("ForMaskedLM", "ForQuestionAnswering", "ForTokenClassification", "ForSequenceClassification",
             "ForMultipleChoice", "ForPreTraining", "Model"),
    heads=(first_token_classifier("gelu"), first_token_scorer("multiple_choice", "summary", "gelu",
                                                              electra_summary_dropout), REPLACED_TOKENS,
           GENERATOR))
