"""The heads a model family declares (``Family.heads``): its variants of the shared heads, and heads of its own.

A variant keeps the shared head's name, labels and place in ``HeadsOutput`` and changes what transformers' class of
that family computes; a head of its own is a new ``HeadSpec``. ``heads.head_specs_for(config)`` puts them in a
model's table of heads, so loading, the forward pass and export read them as they read BERT's.

  sequence classification   RoBERTa, XLM-R (tanh), ELECTRA (GELU): ``first_token_classifier``: no pooler; the first
                            token, dropout, ``classifier.dense``, the activation, dropout, ``classifier.out_proj``.
                            DistilBERT: ``first_token_scorer``: ``pre_classifier`` (H -> H), ReLU, dropout,
                            ``classifier``.
  multiple choice           DistilBERT the same (one score per choice); ELECTRA its sequence summary
                            (``sequence_summary.summary``, GELU, dropout 0.1, ``classifier``).
  sentence order (ALBERT)   ``SENTENCE_ORDER``: the ``nsp`` slot of ``AlbertForPreTraining``: dropout, then
                            ``sop_classifier.classifier`` on the pooled vector; labels ``sentence_order_label``.
  replaced tokens (ELECTRA) ``REPLACED_TOKENS``: ``ElectraForPreTraining``'s discriminator: one logit per token,
                            above 0 where it calls the token replaced; labels ``replaced_labels`` (1 = replaced).

Losses are transformers': cross-entropy (MSE with one label) for classification, cross-entropy over the choices,
and for replaced tokens the binary cross-entropy over the tokens the attention mask keeps.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from engine.model.config import BertConfig
from engine.model.head_modules import (
    DroppedLinear, FirstTokenClassifier, ProjectedScorer, ReplacedTokenHead, classifier_dropout,
)
from engine.model.head_specs import HEADS, HeadInput, HeadSpec
from engine.model.outputs import ClassificationOutput, MultipleChoiceOutput, NextSentenceOutput

ELECTRA_SUMMARY_DROPOUT = 0.1      # transformers' ElectraConfig.summary_last_dropout (the only value read)


@dataclass
class ReplacedTokenOutput:
    """ELECTRA's discriminator: a logit per token, above 0 where it calls the token replaced."""

    logits: torch.Tensor                     # (B, S)
    loss: torch.Tensor | None = None         # binary cross-entropy over the real tokens (attention mask 1)


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor | None, num_labels: int) -> torch.Tensor | None:
    """transformers' sequence-classification loss of ``logits`` (B, num_labels): MSE with one label (regression),
    else cross-entropy against ``labels`` (B,); None without labels."""
    if labels is None:
        return None
    if num_labels == 1:
        return F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))          # (B,), (B,)
    return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))              # (B, L), (B,)


def _classify_first_token(model: Any, x: HeadInput) -> ClassificationOutput:
    logits = model.head_module("classifier")(x.hidden)                                # (B, S, H) -> (B, L)
    return ClassificationOutput(logits, sequence_loss(logits, x.targets.get("class_labels"), model.config.num_labels))


def _score_first_tokens(model: Any, x: HeadInput) -> MultipleChoiceOutput:
    scores = model.head_module("multiple_choice")(x.hidden)                           # (B*C, S, H) -> (B*C, 1)
    logits = scores.view(-1, x.choices)                                               # (B*C, 1) -> (B, C)
    labels = x.targets.get("choice_labels")
    return MultipleChoiceOutput(logits, None if labels is None else F.cross_entropy(logits, labels.view(-1)))


def _order_sentences(model: Any, x: HeadInput) -> NextSentenceOutput:
    if x.targets.get("next_sentence_label") is not None:      # never dropped silently: it is another task's label
        raise ValueError("this model's head in the next-sentence place predicts sentence order (ALBERT's); give its "
                         "labels as sentence_order_label (0: the two segments in order, 1: swapped)")
    logits = model.head_module("nsp")(x.pooled)                                       # (B, H) -> (B, 2)
    labels = x.targets.get("sentence_order_label")                                    # (B,) 0 = in order
    return NextSentenceOutput(logits, None if labels is None else F.cross_entropy(logits, labels.view(-1)))


def _detect_replaced(model: Any, x: HeadInput) -> ReplacedTokenOutput:
    if "mlm" not in model.heads and x.targets.get("labels") is not None:     # transformers' name for these labels
        raise ValueError("labels are the masked LM's, and this model has none; give the replaced-token labels as "
                         "replaced_labels (1 where a token was replaced)")
    logits = model.head_module("replaced_tokens")(x.hidden)                           # (B, S, H) -> (B, S)
    labels = x.targets.get("replaced_labels")                                         # (B, S) 1 = replaced
    if labels is None:
        return ReplacedTokenOutput(logits)
    keep = torch.ones_like(labels, dtype=torch.bool) if x.attention_mask is None else x.attention_mask == 1
    loss = F.binary_cross_entropy_with_logits(logits[keep], labels[keep].to(logits.dtype))   # (N,), (N,)
    return ReplacedTokenOutput(logits, loss)


def first_token_classifier(act: str) -> HeadSpec:
    """The sequence-classification head of RoBERTa and XLM-R (``act`` "tanh") or ELECTRA ("gelu"): no pooler,
    ``classifier.dense`` and ``classifier.out_proj`` on the first token (``FirstTokenClassifier``)."""
    return replace(HEADS["classifier"], build=lambda config, model: FirstTokenClassifier(config, act),
                   run=_classify_first_token, pooled=False, dropout=False)


def first_token_scorer(head: str, projection: str, act: str, dropout: Callable[[BertConfig], float]) -> HeadSpec:
    """The shared ``head`` ("classifier" or "multiple_choice") scoring the first token behind a projection of the
    family's (``ProjectedScorer``): DistilBERT's ``pre_classifier`` + ReLU, ELECTRA's ``summary`` + GELU; no pooler.
    The projection's keys sit under transformers' ``classifier.`` here (the family renames them)."""
    runs = {"classifier": _classify_first_token, "multiple_choice": _score_first_tokens}
    outputs = {"classifier": lambda config: config.num_labels, "multiple_choice": lambda config: 1}[head]
    return replace(HEADS[head], run=runs[head], pooled=False, dropout=False,
                   build=lambda config, model: ProjectedScorer(config, outputs(config), projection, act,
                                                               dropout(config)))


SENTENCE_ORDER = replace(
    HEADS["nsp"], noun="sentence-order", title="sentence order (SOP)", run=_order_sentences,
    build=lambda config, model: DroppedLinear(config.hidden_size, 2, classifier_dropout(config)),
    targets=("sentence_order_label",), hf_num_labels=2, attribution=(), tried_in=None, how_to_get=None)
"""ALBERT's sentence-order head, in the ``nsp`` slot: ``AlbertForPreTraining`` is ``BertForPreTraining``'s layout."""

REPLACED_TOKENS = HeadSpec(
    "replaced_tokens", "discriminator_predictions", "discriminator_predictions.", "BertForPreTraining",
    "replaced-token detection", "replaced-token detection (ELECTRA's discriminator)",
    build=lambda config, model: ReplacedTokenHead(config), run=_detect_replaced, targets=("replaced_labels",))
"""ELECTRA's discriminator head; its class, ``BertForPreTraining`` in the shared names, is the family's
``ElectraForPreTraining`` (the joint ``BertForPreTraining`` of BERT is not ELECTRA's)."""


def electra_summary_dropout(config: BertConfig) -> float:
    """The dropout after ELECTRA's sequence summary: transformers' default, the only one read."""
    return ELECTRA_SUMMARY_DROPOUT
