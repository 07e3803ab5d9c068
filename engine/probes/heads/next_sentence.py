"""Next-sentence prediction: does sentence B follow sentence A? As ``BertForNextSentencePrediction``.

``next_sentence(loaded, text, text_pair)`` encodes ``[CLS] A [SEP] B [SEP]`` (type ids 0 then 1),
runs the NSP head on the pooled [CLS] vector and returns a :class:`NextSentenceResult`: the two
logits (index 0 = IsNext, as in the original BERT and ``transformers``), their softmax, and where
[CLS] looks: each layer's attention row of [CLS], averaged over the heads (the pooled vector the
head reads is the last layer's [CLS] state). ``to_pipeline()`` gives the scores in the
``text-classification`` pipeline's shape with ``top_k=None`` (every label, best first). ALBERT's sentence-order
head sits in the same place (``AlbertForPreTraining``): its outputs are named InOrder / Swapped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.head_inputs import batch_tensors, check_text, encode_pairs

LABELS = ("IsNext", "NotNext")     # the NSP head's two outputs, in order
ORDER_LABELS = ("InOrder", "Swapped")   # ALBERT's sentence-order head in the same place: 0 in order, 1 swapped


@dataclass
class NextSentenceResult:
    """The NSP head's answer for one sentence pair, and [CLS]'s attention in every layer."""

    text: str
    text_pair: str
    source: str                     # which model (LoadedModel.source)
    tokens: list[str]               # S pieces, specials included
    token_type_ids: list[int]
    logits: list[float]             # [IsNext, NotNext]
    probabilities: list[float]      # softmax of the logits
    cls_attention: list[list[float]]  # (L, S): row l = layer l's attention from [CLS], mean over heads; sums to 1
    labels: tuple[str, str] = LABELS  # the head's two outputs: NSP's, or ALBERT's sentence order (ORDER_LABELS)

    @property
    def is_order(self) -> bool:
        """Whether the head predicts sentence order (ALBERT), not next sentence (BERT)."""
        return self.labels == ORDER_LABELS

    @property
    def is_next(self) -> float:
        """P(IsNext): the probability that B follows A."""
        return self.probabilities[0]

    def to_pipeline(self) -> list[dict[str, Any]]:
        """``[{"label": "IsNext" | "NotNext", "score"}]``, best first (text-classification, ``top_k=None``)."""
        rows = [{"label": label, "score": score} for label, score in zip(self.labels, self.probabilities)]
        return sorted(rows, key=lambda row: row["score"], reverse=True)


def next_sentence(loaded: LoadedModel, text: str, text_pair: str) -> NextSentenceResult:
    """P(IsNext) of ``text_pair`` after ``text`` from the NSP head, with [CLS]'s attention per layer.

    Raises ``ValueError`` without an NSP head, for an empty sentence, or an input longer than the model reads.
    """
    loaded.require_head("nsp")
    check_text(text, "sentence A", "write the first sentence")
    check_text(text_pair, "sentence B", "write the sentence that may follow A")
    encoding, = encode_pairs(loaded, [(text, text_pair)])
    inputs = batch_tensors(loaded, [encoding])                          # (1, S) each
    with torch.inference_mode():
        out = loaded.model(**inputs, output_attentions=True, compute=("nsp",))
        logits = out.nsp.logits.float()[0]                              # (2,)
        probabilities = logits.softmax(-1)                              # (2,)
        rows = torch.stack([layer[0, :, 0, :] for layer in out.encoder.attentions])   # L x (nh, S) -> (L, nh, S)
        cls_attention = rows.float().mean(dim=1)                        # (L, S)
    return NextSentenceResult(
        text=text, text_pair=text_pair, source=loaded.source, tokens=list(encoding.shown),
        token_type_ids=list(encoding.token_type_ids), logits=logits.tolist(), probabilities=probabilities.tolist(),
        cls_attention=cls_attention.cpu().tolist(),
        labels=ORDER_LABELS if loaded.model.specs["nsp"].noun == "sentence-order" else LABELS)
