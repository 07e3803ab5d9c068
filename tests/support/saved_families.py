"""Small random models of the BERT family's descendants, saved by ``transformers`` beside their own kind of
tokenizer (``family_tokenizers.build``), as a user's models folder holds them: for the tests that walk the tabs
with every family (the served app, the browser)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers

from support.family_tokenizers import build

SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=130)
# name -> (tokenizer kind, config class, its fields, class stem): ELECTRA and ALBERT with E < H (a projection)
FAMILIES = {
    "roberta": ("roberta", transformers.RobertaConfig, SHAPE, "Roberta"),
    "xlm-roberta": ("xlmr", transformers.XLMRobertaConfig, SHAPE, "XLMRoberta"),
    "distilbert": ("distilbert", transformers.DistilBertConfig,
                   dict(dim=32, n_layers=2, n_heads=4, hidden_dim=48, max_position_embeddings=130), "DistilBert"),
    "electra": ("distilbert", transformers.ElectraConfig, dict(SHAPE, embedding_size=16), "Electra"),
    "albert": ("albert", transformers.AlbertConfig, dict(SHAPE, embedding_size=16), "Albert"),
    # a window of 8 shorter than the texts; every third layer global
    "modernbert": ("roberta", transformers.ModernBertConfig,
                   dict(SHAPE, num_hidden_layers=3, local_attention=8, global_attn_every_n_layers=3), "ModernBert"),
    # DeBERTa-v3's shape: relative positions in 8 buckets, no absolute position or segment table
    "deberta-v2": ("xlmr", transformers.DebertaV2Config,
                   dict(SHAPE, relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"],
                        position_biased_input=False, norm_rel_ebd="layer_norm", type_vocab_size=0), "DebertaV2"),
}


def save_family_model(family: str, folder: Path, task: str = "ForMaskedLM", seed: int = 0, layers: int | None = None,
                      positions: int | None = None, norms_drawn: bool = True, std: float | None = 0.3,
                      **config_fields: Any) -> Path:
    """``folder`` holding ``family``'s tokenizer and a random model of its ``task`` class (``ForMaskedLM``,
    ``ForQuestionAnswering``, ``Model``, ...), weights drawn with std ``std`` (0.3: predictions peaked and distinct;
    None: transformers' own initialisation); ``layers`` and ``positions`` (``max_position_embeddings``) change its
    shape, ``config_fields`` its config; ``norms_drawn`` False keeps the layer norms as initialised
    (representations that do not collapse, for comparisons)."""
    kind, config_class, fields, stem = FAMILIES[family]
    build(kind, folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = {name: getattr(tokenizer, name) for name in ("cls_token_id", "sep_token_id", "bos_token_id", "eos_token_id")
           if family == "modernbert"}                      # ModernBERT's config names its specials' ids
    shape = {**fields, **({"n_layers" if family == "distilbert" else "num_hidden_layers": layers} if layers else {}),
             **({"max_position_embeddings": positions} if positions else {})}
    config = config_class(**{**shape, **config_fields}, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                          **ids)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, stem + task)(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if std is not None and (norms_drawn or "LayerNorm" not in name):
                parameter.normal_(0.0, std)
    model.save_pretrained(folder)
    return folder
