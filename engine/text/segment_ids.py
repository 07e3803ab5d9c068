"""Segment (token type) ids as ``transformers`` passes them to each family's model.

BERT, ELECTRA and ALBERT read a pair as ``[CLS] A [SEP] B [SEP]`` and their models take the tokenizer's type
ids (0 for the first text, 1 for the second). RoBERTa's and XLM-R's tokenizers (``<s> A </s></s> B </s>``)
return no type ids, whatever their post-processor writes, and their models have one type id: the model sees
zeros. DistilBERT has no segment table (``type_vocab_size`` 0). So segment ids go in only where the model has
two or more types and the tokenizer's pair layout has one separator between the texts.
"""
from __future__ import annotations

from typing import Any

from engine.text.special_roles import layout_template


def separated_once(tokenizer: Any) -> bool:
    """Whether the tokenizer's pair layout puts one special token between its texts (BERT's ``[SEP]``), not
    RoBERTa's two (``</s></s>``), whose families take no segment ids."""
    template = layout_template(tokenizer.backend, True)
    if ("segment", "A") not in template or ("segment", "B") not in template:
        return True
    between = template[template.index(("segment", "A")) + 1:template.index(("segment", "B"))]
    return len(between) <= 1


def uses_segment_ids(config: Any, tokenizer: Any) -> bool:
    """Whether a model of ``config`` gets the tokenizer's segment ids (else none: the model uses zeros)."""
    return config.type_vocab_size >= 2 and separated_once(tokenizer)
