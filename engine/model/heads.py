"""The model that carries any subset of the task heads, on top of the encoder.

What each head is (its module, keys, transformers class, whether it reads the pooled [CLS] vector
or is sized by ``num_labels``) is its ``HeadSpec`` in ``engine.model.head_specs.HEADS`` (for a model of
another family, ``head_specs_for``: its variants and heads of its own, ``engine.model.family_heads``); this
module builds the heads a model asks for and runs them. The built-in heads and their Hugging
Face parameter names:
  mlm         cls.predictions.{transform.dense, transform.LayerNorm, bias}; decoder tied to word embeddings
  nsp         cls.seq_relationship
  qa                qa_outputs      (start/end logits per token)
  classifier        classifier      (sequence classification on the pooled output)
  token_classifier  classifier      (a label per token: ``BertForTokenClassification``)
  multiple_choice   classifier      (one score per choice from the pooled output: ``BertForMultipleChoice``)

Hugging Face names all three classifier modules ``classifier``. Ours are called after the head
(``classifier``, ``token_classifier``, ``multiple_choice``), so a state dict says which head it
holds; ``engine.checkpoints.key_mapping`` renames them to and from HF's ``classifier.*`` keys.
A model carries at most one of them (heads with the same ``hf_prefix``), because one checkpoint
cannot hold two ``classifier`` modules.

Multiple choice takes ``input_ids`` of shape (B, C, S): one row of tokens per choice. Such a
call runs only that head, on the (B*C, S) flattened batch, as ``BertForMultipleChoice``.

In this project ``cls`` means the [CLS] token, with one exception: the module ``cls``
(``BertForPreTraining.cls.predictions``, ``cls.seq_relationship``) keeps Hugging Face's
name, because checkpoints are read and written with HF's parameter keys.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import BertConfig
from engine.model.encoder import BertModel, init_bert_weights
from engine.model.families.registry import family_of
from engine.model.head_specs import HEADS, HeadInput, HeadSpec, shared_key_groups, target_arguments
from engine.model.outputs import (
    ClassificationOutput, HeadsOutput, MaskedLMOutput, MultipleChoiceOutput, NextSentenceOutput, SpanOutput,
    TokenClassificationOutput,
)

IGNORE_INDEX = -100


def head_specs_for(config: BertConfig) -> dict[str, HeadSpec]:
    """The heads a model of ``config``'s family can carry, by name, in canonical order: ``HEADS``, each replaced
    by the family's variant of it where the family declares one (``Family.heads``), then the family's own."""
    own = {spec.name: spec for spec in family_of(config.model_type).heads}
    table = {name: own.pop(name, spec) for name, spec in HEADS.items()}
    return {**table, **own}


class BertWithHeads(nn.Module):
    """A BERT encoder with any of the MLM, NSP, QA, classification, token-classification and
    multiple-choice heads (at most one of the last three: they share HF's ``classifier`` keys).

    ``heads`` picks which exist; a model loaded from a checkpoint has exactly the heads
    the checkpoint has. The pooler exists when asked (NSP, classification and multiple
    choice need it).
    """

    def __init__(self, config: BertConfig, heads: tuple[str, ...] | list[str] = ("mlm", "nsp"),
                 add_pooling_layer: bool | None = None) -> None:
        super().__init__()
        self.specs = head_specs_for(config)      # the heads its family reads: BERT's, the family's variants and own
        unknown = set(heads) - set(self.specs)
        if unknown:
            raise ValueError(f"unknown heads {sorted(unknown)}; choose from {tuple(self.specs)}")
        clash = shared_key_groups(tuple(heads), self.specs)
        if clash:
            raise ValueError(f"a model carries at most one of the heads {', '.join(clash[0])}: transformers calls "
                             f"each of them '{self.specs[clash[0][0]].hf_prefix.rstrip('.')}', so one checkpoint "
                             "cannot hold two")
        self.config = config
        self.heads = tuple(h for h in self.specs if h in heads)
        pooled = [self.specs[h].noun for h in self.heads if self.specs[h].pooled]
        if add_pooling_layer is None:
            add_pooling_layer = bool(pooled) or not heads
        if not add_pooling_layer and pooled:
            raise ValueError(f"the {' and '.join(pooled)} head{'s need' if len(pooled) > 1 else ' needs'} "
                             "the pooler")
        family = family_of(config.model_type)
        build_base = family.build_base                              # a family whose layers are not BERT's
        self.bert = (build_base(config, add_pooling_layer) if build_base is not None
                     else BertModel(config, add_pooling_layer=add_pooling_layer))
        for name in self.heads:     # in registry order: the modules (and their random init) keep one order
            spec = self.specs[name]
            if spec.dropout and "dropout" not in dict(self.named_children()):
                # as transformers: classifier_dropout, else hidden_dropout_prob, before the classifier
                dropout = (config.classifier_dropout if config.classifier_dropout is not None
                           else config.hidden_dropout_prob)
                self.dropout = nn.Dropout(dropout)
            self._attach(spec.module, spec.build(config, self))
        self.init_weights()

    def _attach(self, path: str, module: nn.Module) -> None:
        """Register ``module`` at the dotted ``path`` ("cls.predictions"), making plain containers on the way."""
        *parents, leaf = path.split(".")
        parent: nn.Module = self
        for part in parents:
            if part not in dict(parent.named_children()):
                parent.add_module(part, nn.Module())
            parent = parent.get_submodule(part)
        parent.add_module(leaf, module)

    def head_module(self, head: str) -> nn.Module:
        """The module of ``head`` (``ValueError`` when the model has no such head)."""
        if head not in self.heads:
            raise ValueError(f"this model has no {head} head; it has: {', '.join(self.heads) or 'no heads'}")
        return self.get_submodule(self.specs[head].module)

    def head_parameters(self, head: str) -> list[nn.Parameter]:
        """The parameters of ``head`` itself: what trains with it (a tied weight belongs to its owner)."""
        return self.specs[head].trainable(self.head_module(head))

    def init_weights(self) -> None:
        """BERT initialisation of every parameter, then each head's own (the MLM bias zero); keeps the decoder tied."""
        init_bert_weights(self, self.config.initializer_range)
        for name in self.heads:
            if self.specs[name].init is not None:
                self.specs[name].init(self.head_module(name))

    @property
    def has_pooler(self) -> bool:
        return self.bert.pooler is not None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        output_qk: bool = False,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        class_labels: torch.Tensor | None = None,
        token_labels: torch.Tensor | None = None,
        choice_labels: torch.Tensor | None = None,
        sparse_mlm: bool = False,
        mlm_positions: torch.Tensor | None = None,
        compute: tuple[str, ...] | None = None,
        **targets: torch.Tensor,
    ) -> HeadsOutput:
        """Run the encoder and the heads in ``compute`` (default: all the model has that take this
        input's shape, see below; ``()``: none).

        ``labels`` (B, S) holds original ids at masked positions and -100 elsewhere. The MLM
        head runs at every position unless ``mlm_positions`` (B, S) bool picks some, or
        ``sparse_mlm`` picks the labelled ones (same loss as dense, a fraction of the cost).
        ``class_labels`` (B,), ``token_labels`` (B, S) (-100 where unlabelled) and
        ``choice_labels`` (B,) (the right choice) are the classifiers' targets.

        Multiple choice: ``input_ids`` (and the masks, type and position ids) of shape (B, C, S)
        run the multiple-choice head alone on the (B*C, S) flattened batch; ``encoder`` then
        holds (B*C, ...) tensors. With (B, S) input that head does not run by default, and
        asking for it in ``compute`` raises ``ValueError``, as does (B, C, S) input for another head.

        ``targets``: the labels of a registered head that declares its own (``HeadSpec.targets``), by name;
        any other keyword raises ``TypeError`` naming it.
        """
        unknown = sorted(set(targets) - set(target_arguments(self.specs)))
        if unknown:
            raise TypeError(f"BertWithHeads.forward() got unexpected keyword argument(s) {', '.join(unknown)}: no "
                            "registered head reads them (HeadSpec.targets)")
        choices = input_ids.size(1) if input_ids.dim() == 3 else None
        compute = self._heads_to_compute(compute, choices is not None)
        if choices is not None:
            input_ids, attention_mask, token_type_ids, position_ids = (
                None if t is None else t.reshape(-1, t.size(-1))                # (B, C, S) -> (B*C, S)
                for t in (input_ids, attention_mask, token_type_ids, position_ids))
        encoded = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                            output_attentions, output_hidden_states, output_qk)
        hidden, pooled = encoded.last_hidden_state, encoded.pooler_output  # (B, S, H), (B, H); B*C rows for choices
        out = HeadsOutput(encoder=encoded)
        x = HeadInput(hidden, pooled, choices, dict(
            labels=labels, next_sentence_label=next_sentence_label, start_positions=start_positions,
            end_positions=end_positions, class_labels=class_labels, token_labels=token_labels,
            choice_labels=choice_labels, sparse_mlm=sparse_mlm, mlm_positions=mlm_positions, **targets),
            attention_mask)
        losses = []
        for name in compute:
            result = self.specs[name].run(self, x)
            out.set_result(name, result)
            if getattr(result, "loss", None) is not None:
                losses.append(result.loss)
        if losses:
            out.loss = torch.stack(losses).sum()
        return out

    def _heads_to_compute(self, compute: tuple[str, ...] | None, choice_input: bool) -> tuple[str, ...]:
        """The heads a pass runs: those asked for that the model has; multiple choice iff the input is (B, C, S)."""
        choice_heads = [h for h in self.heads if self.specs[h].choice_input]
        if compute is None:
            wanted = tuple(h for h in self.heads if (h in choice_heads) == choice_input)
        else:
            wanted = tuple(h for h in self.heads if h in compute)    # registry order, whatever the caller's
        if choice_input:
            if not choice_heads:
                raise ValueError("input_ids of shape (B, C, S) are for the multiple-choice head, and this model "
                                 "has none; give (B, S) input_ids")
            others = [h for h in wanted if h not in choice_heads]
            if others:
                raise ValueError(f"input_ids of shape (B, C, S) feed only the multiple-choice head; run "
                                 f"{', '.join(others)} on (B, S) input_ids")
        elif any(h in choice_heads for h in wanted):
            raise ValueError("the multiple-choice head needs input_ids of shape (B, C, S): one row of tokens "
                             "per choice")
        return wanted

    def masked_lm(self, hidden: torch.Tensor, labels: torch.Tensor | None = None,
                  positions: torch.Tensor | None = None, sparse: bool = False) -> MaskedLMOutput:
        """MLM logits from the last hidden state (B, S, H): everywhere, or only where ``positions`` (B, S) is True
        (``sparse`` without ``positions``: where ``labels`` has a label).

        The loss is the mean cross-entropy over the positions with a label (not -100).
        """
        head = self.cls.predictions
        if positions is None and sparse and labels is not None:
            positions = labels != IGNORE_INDEX                           # (B, S)
        if positions is not None:
            rows = positions.nonzero()                                   # (N, 2)
            logits = head(hidden[positions])                             # (N, H) -> (N, V)
            loss = _mean_cross_entropy(logits, labels[positions]) if labels is not None else None   # (N,) targets
            return MaskedLMOutput(logits=logits, positions=rows, loss=loss)
        logits = head(hidden)                                            # (B, S, V)
        loss = None
        if labels is not None:
            loss = _mean_cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))   # (B*S, V), (B*S,)
        return MaskedLMOutput(logits=logits, loss=loss)

    def next_sentence(self, pooled: torch.Tensor, label: torch.Tensor | None = None) -> NextSentenceOutput:
        """IsNext / NotNext logits (B, 2) from the pooled output (B, H)."""
        logits = self.cls.seq_relationship(pooled)                       # (B, 2)
        loss = F.cross_entropy(logits, label.view(-1)) if label is not None else None   # label (B,)
        return NextSentenceOutput(logits=logits, loss=loss)

    def answer_span(self, hidden: torch.Tensor, start: torch.Tensor | None = None,
                    end: torch.Tensor | None = None) -> SpanOutput:
        """Start and end logits (B, S) from the last hidden state (B, S, H); loss as ``BertForQuestionAnswering``."""
        start_end = self.qa_outputs(hidden)                              # (B, S, 2)
        out = SpanOutput(start_logits=start_end[..., 0].contiguous(),   # (B, S)
                         end_logits=start_end[..., 1].contiguous())     # (B, S)
        if start is not None and end is not None:
            # As transformers: positions outside the sequence are clamped to S and ignored.
            seq_len = out.start_logits.size(1)
            start = start.view(-1).clamp(0, seq_len)                     # (B,)
            end = end.view(-1).clamp(0, seq_len)                         # (B,)
            out.loss = (F.cross_entropy(out.start_logits, start, ignore_index=seq_len)
                        + F.cross_entropy(out.end_logits, end, ignore_index=seq_len)) / 2
        return out

    def classify(self, pooled: torch.Tensor, labels: torch.Tensor | None = None) -> ClassificationOutput:
        """Class logits (B, num_labels) from the pooled output (B, H); MSE when num_labels == 1, as transformers."""
        logits = self.classifier(self.dropout(pooled))                   # (B, num_labels)
        loss = None
        if labels is not None:
            if self.config.num_labels == 1:
                loss = F.mse_loss(logits.view(-1), labels.view(-1).to(logits.dtype))         # (B,), (B,)
            else:
                loss = F.cross_entropy(logits.view(-1, self.config.num_labels), labels.view(-1))  # (B, C), (B,)
        return ClassificationOutput(logits=logits, loss=loss)

    def classify_tokens(self, hidden: torch.Tensor, labels: torch.Tensor | None = None) -> TokenClassificationOutput:
        """Label logits (B, S, num_labels) for every token of the last hidden state (B, S, H).

        The loss is the mean cross-entropy over the labelled positions (``labels`` (B, S), -100
        elsewhere), as ``BertForTokenClassification``; 0 when none is labelled (transformers: NaN).
        """
        logits = self.token_classifier(self.dropout(hidden))             # (B, S, H) -> (B, S, num_labels)
        loss = None
        if labels is not None:
            loss = _mean_cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))   # (B*S, L), (B*S,)
        return TokenClassificationOutput(logits=logits, loss=loss)

    def score_choices(self, pooled: torch.Tensor, choices: int, labels: torch.Tensor | None = None
                      ) -> MultipleChoiceOutput:
        """Choice logits (B, C) from the pooled output of the flattened batch (B*C, H), as ``BertForMultipleChoice``;
        the loss is the cross-entropy over the C choices against ``labels`` (B,)."""
        scores = self.multiple_choice(self.dropout(pooled))              # (B*C, H) -> (B*C, 1)
        logits = scores.view(-1, choices)                                # (B*C, 1) -> (B, C)
        loss = F.cross_entropy(logits, labels.view(-1)) if labels is not None else None   # labels (B,)
        return MultipleChoiceOutput(logits=logits, loss=loss)


def _mean_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (N, V) vs (N,) averaged over the targets that are not -100 (no copy of the logits,
    no host sync); 0, still attached to the graph, when there are none."""
    total = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="sum")
    return total / (targets != IGNORE_INDEX).sum().clamp_min(1)
