"""What a forward pass returns: one small dataclass per purpose, as ``transformers.modeling_outputs``.

* :class:`EncoderOutput` -- :class:`engine.model.encoder.BertModel` (``BaseModelOutputWithPooling``):
  the last hidden state and pooled output, plus what probing asks for (every layer's hidden
  states, attention probabilities, queries, keys and pre-softmax scores).
* One result per head: :class:`MaskedLMOutput` (``MaskedLMOutput``),
  :class:`NextSentenceOutput` (``NextSentencePredictorOutput``), :class:`SpanOutput`
  (``QuestionAnsweringModelOutput``), :class:`ClassificationOutput` (``SequenceClassifierOutput``),
  :class:`TokenClassificationOutput` (``TokenClassifierOutput``), :class:`MultipleChoiceOutput`
  (``MultipleChoiceModelOutput``).
* :class:`HeadsOutput` -- :class:`engine.model.heads.BertWithHeads`: the encoder output, the
  result of each head that ran (``None`` for the others) and the summed loss.

Shapes: B batch, S sequence, H hidden, nh heads, hd head size, V vocabulary, L layers,
N masked positions, C choices. A loss is ``None`` when no labels were given.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class EncoderOutput:
    """The encoder's output. The tuples are ``None`` unless the call asked for them."""

    last_hidden_state: torch.Tensor                         # (B, S, H)
    pooler_output: torch.Tensor | None = None               # (B, H); None for a model without the pooler
    hidden_states: tuple[torch.Tensor, ...] | None = None   # L + 1 of (B, S, H), [0] embeddings; output_hidden_states
    attentions: tuple[torch.Tensor, ...] | None = None      # L of (B, nh, S, S) softmax probabilities; output_attentions
    queries: tuple[torch.Tensor, ...] | None = None         # L of (B, nh, S, hd); output_qk
    keys: tuple[torch.Tensor, ...] | None = None            # L of (B, nh, S, hd); output_qk
    attention_scores: tuple[torch.Tensor, ...] | None = None  # L of (B, nh, S, S), pre-softmax, masked; output_qk


class LayerCollector:
    """What a base model's forward gathers from its layers, the same for every family: each layer's probes
    (``{"probs", "scores", "queries", "keys"}``) kept when asked for (``output_attentions``: probs; ``output_qk``:
    the rest), or handed to ``on_layer`` and not held; the hidden states after each layer when asked for."""

    def __init__(self, first: torch.Tensor, output_attentions: bool, output_qk: bool, output_hidden_states: bool,
                 on_layer: Callable[[int, dict[str, torch.Tensor]], None] | None) -> None:
        self.output_attentions, self.output_qk, self.on_layer = output_attentions, output_qk, on_layer
        self.hidden: list[torch.Tensor] | None = [first] if output_hidden_states else None   # (B, S, H) each
        self.wanted = ({"probs"} if output_attentions else set()) | ({"scores", "queries", "keys"} if output_qk
                                                                     else set())
        self.collected: dict[str, list[torch.Tensor]] = {"probs": [], "scores": [], "queries": [], "keys": []}

    @property
    def explicit(self) -> bool:
        """Whether the layers must take the explicit attention path (probabilities, scores, queries, keys)."""
        return self.output_attentions or self.output_qk

    def add(self, index: int, hidden: torch.Tensor, probes: dict[str, torch.Tensor]) -> None:
        """Layer ``index``'s output (B, S, H) and probes."""
        if self.on_layer is not None:
            self.on_layer(index, probes)                                 # handed over, not held
        else:
            for name, value in probes.items():
                if name in self.wanted:
                    self.collected[name].append(value)
        if self.hidden is not None:
            self.hidden.append(hidden)

    def output(self, last: torch.Tensor, pooled: torch.Tensor | None) -> EncoderOutput:
        """The ``EncoderOutput`` of the last hidden state (B, S, H) and the pooled output (B, H) or None."""
        return EncoderOutput(
            last_hidden_state=last, pooler_output=pooled,
            hidden_states=tuple(self.hidden) if self.hidden is not None else None,
            attentions=tuple(self.collected["probs"]) if self.output_attentions else None,
            queries=tuple(self.collected["queries"]) if self.output_qk else None,
            keys=tuple(self.collected["keys"]) if self.output_qk else None,
            attention_scores=tuple(self.collected["scores"]) if self.output_qk else None,
        )


@dataclass
class MaskedLMOutput:
    """Masked-LM logits over the vocabulary: at every position (dense) or at chosen ones (sparse)."""

    logits: torch.Tensor                     # dense (B, S, V); sparse (N, V), row n at positions[n]
    positions: torch.Tensor | None = None    # sparse only: (N, 2) [batch, position] rows, row-major order
    loss: torch.Tensor | None = None         # mean cross-entropy over the labelled positions

    @property
    def sparse(self) -> bool:
        """True when ``logits`` holds only the rows at ``positions``."""
        return self.positions is not None


@dataclass
class NextSentenceOutput:
    """Next-sentence prediction from the pooled [CLS] vector."""

    logits: torch.Tensor                     # (B, 2); index 0 = IsNext
    loss: torch.Tensor | None = None


@dataclass
class SpanOutput:
    """Extractive QA: where the answer span starts and ends."""

    start_logits: torch.Tensor               # (B, S)
    end_logits: torch.Tensor                 # (B, S)
    loss: torch.Tensor | None = None         # (CE(start) + CE(end)) / 2


@dataclass
class ClassificationOutput:
    """Sequence classification (or regression when num_labels == 1) from the pooled [CLS] vector."""

    logits: torch.Tensor                     # (B, num_labels)
    loss: torch.Tensor | None = None


@dataclass
class TokenClassificationOutput:
    """A label for every token (tagging, e.g. named entities) from the last hidden state."""

    logits: torch.Tensor                     # (B, S, num_labels)
    loss: torch.Tensor | None = None         # mean cross-entropy over the labelled positions (not -100)


@dataclass
class MultipleChoiceOutput:
    """Which of C choices is right: one score per choice from its pooled [CLS] vector."""

    logits: torch.Tensor                     # (B, C)
    loss: torch.Tensor | None = None         # cross-entropy over the C choices


@dataclass
class HeadsOutput:
    """A :class:`~engine.model.heads.BertWithHeads` pass: the encoder output and each head that ran.

    After a multiple-choice pass ((B, C, S) input) the encoder tensors are those of the
    flattened (B*C, S) batch.
    """

    encoder: EncoderOutput
    mlm: MaskedLMOutput | None = None
    nsp: NextSentenceOutput | None = None
    qa: SpanOutput | None = None
    classifier: ClassificationOutput | None = None
    token_classifier: TokenClassificationOutput | None = None
    multiple_choice: MultipleChoiceOutput | None = None
    loss: torch.Tensor | None = None         # sum of the heads' losses (as transformers); None without labels
    extra: dict[str, Any] = field(default_factory=dict)   # results of registered heads without a field here

    def set_result(self, head: str, result: Any) -> None:
        """Store ``head``'s result: in its field (``mlm``, ``qa``, ...), else in ``extra``."""
        if head in self.__dataclass_fields__ and head not in _NOT_HEADS:
            setattr(self, head, result)
        else:
            self.extra[head] = result

    def result(self, head: str) -> Any:
        """``head``'s result, None when it did not run."""
        if head in self.__dataclass_fields__ and head not in _NOT_HEADS:
            return getattr(self, head)
        return self.extra.get(head)


_NOT_HEADS = ("encoder", "loss", "extra")
