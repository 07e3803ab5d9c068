"""BERT (Devlin et al., 2019): the shared parts as they are; its ``config.json`` is ``BertConfig``'s own and its
checkpoints are read by ``engine.checkpoints.key_mapping`` (every BERT layout: task classes, DDP's ``module.``,
TF-port LayerNorm names)."""
from __future__ import annotations

from engine.model.config import BertConfig
from engine.model.families.family import Family

BERT = Family(name="BERT", model_types=("bert",), class_stem="Bert", config_from_hf=BertConfig.from_dict,
              config_to_hf=BertConfig.to_dict)
