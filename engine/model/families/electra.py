"""ELECTRA (Clark et al., 2020): BERT's layers under ``electra.``, embeddings of width ``embedding_size`` projected
to the hidden width (``embeddings_project``, present when the two differ), no pooler. Its generator's masked-LM
head (``generator_predictions``: dense to E, GELU, LayerNorm; ``generator_lm_head`` tied to the embeddings) is
read as the shared one; the discriminator's replaced-token head (``discriminator_predictions``) and the
sequence-classification head are not read yet: their keys are dropped."""
from __future__ import annotations

from typing import Any

from engine.model.config import BertConfig
from engine.model.families.family import Family, Renames, bert_named_config, bert_named_dict

RENAMES = Renames((
    ("electra.embeddings_project.", "bert.embeddings_project."),
    ("electra.", "bert."),
    ("generator_predictions.dense.", "cls.predictions.transform.dense."),
    ("generator_predictions.LayerNorm.", "cls.predictions.transform.LayerNorm."),
    ("generator_lm_head.weight", "cls.predictions.decoder.weight"),   # tied to the word embeddings
    ("generator_lm_head.bias", "cls.predictions.bias"),
    ("discriminator_predictions.", None),                            # replaced-token detection: not read yet
    ("classifier.dense.", None),                                     # sequence classification: not read yet
    ("classifier.out_proj.", None),
))


def _config(data: dict[str, Any]) -> BertConfig:
    data = {"hidden_size": 256, "embedding_size": 128, "num_attention_heads": 4, "intermediate_size": 1024, **data}
    hidden, size = data["hidden_size"], data["embedding_size"]
    if data.get("hidden_act", "gelu") != "gelu":
        raise ValueError("this ELECTRA's hidden_act is not GELU, which its generator head always uses; "
                         "this app reads ELECTRAs with hidden_act 'gelu'")
    return bert_named_config(data, ELECTRA,
                             embedding_size=None if size == hidden else size)


def _to_hf(config: BertConfig) -> dict[str, Any]:
    return bert_named_dict(config, ELECTRA, embedding_size=config.embedding_width)


ELECTRA = Family(name="ELECTRA", model_types=("electra",), class_stem="Electra", config_from_hf=_config,
                 config_to_hf=_to_hf, renames=RENAMES, base_prefix="electra.")
