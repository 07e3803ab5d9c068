"""What a task head is, in one place: one :class:`HeadSpec` per head, in the ``HEADS`` registry.

A spec says the head's name (as in checkpoints, ``HeadsOutput`` and the API), where its module sits
on :class:`~engine.model.heads.BertWithHeads` (which is also its state-dict prefix), transformers'
prefix and class for the same weights, whether it reads the pooled [CLS] vector or is sized by
``num_labels``, its names for people, how to build its module, which of the module's parameters
train, and its step in a forward pass. The model, checkpoint import and export, the training jobs,
the probes and the explorer read these fields; none keeps a table of heads of its own.

Adding a head: write its module (``engine/model/head_modules.py`` unless it is one ``nn.Linear``),
then add a spec to ``_BUILT_IN`` (or call :func:`register_head`); give it a ``HeadsOutput`` field
if callers read its result by attribute (else it lands in ``HeadsOutput.extra``). A head with labels of
its own names them in ``targets`` (``BertWithHeads.forward`` then takes them as keywords), and the
predictions the Why tab can explain are its ``attribution`` (:class:`AttributionSpec`, builders named
``"module:function"`` and resolved by ``engine.probes.attribution.methods``): ``heads.py`` and the probes keep no
table of heads.

Hugging Face stores the sequence-, token-classification and multiple-choice modules all as
``classifier``; heads with the same ``hf_prefix`` cannot share a model (one checkpoint cannot
hold both), and ``config.json``'s ``architectures`` says whose a checkpoint's keys are.

``HEADS`` is BERT's table. A model family may declare heads of its own (``Family.heads``, the specs in
``engine.model.family_heads``): a spec named as a registered head is the family's variant of it (RoBERTa's
sequence classifier reads the first token, not the pooler), another name a head only that family has (ELECTRA's
replaced-token detection). A model's table is ``heads.head_specs_for(config)``; the functions here that take
``specs`` read that table (default: ``HEADS``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from engine.model.config import BertConfig
from engine.model.head_modules import BertLMPredictionHead


@dataclass(frozen=True)
class HeadInput:
    """What the heads of one forward pass read."""

    hidden: torch.Tensor              # (B, S, H) last hidden state; (B*C, S, H) for (B, C, S) choice input
    pooled: torch.Tensor | None       # (B, H) (or (B*C, H)) pooled [CLS] vectors; None without the pooler
    choices: int | None               # C for (B, C, S) input, else None
    targets: Mapping[str, Any]        # the forward call's label arguments by name (labels, class_labels, ...)
    attention_mask: torch.Tensor | None = None   # (B, S) (or (B*C, S)) 1 = a token, 0 = padding; None: no padding


Form = tuple[str, str, str, str, str, str]
"""The Why tab's form for one prediction: text label, text placeholder, pair label, pair placeholder, target
placeholder, "which" label."""


@dataclass(frozen=True)
class AttributionSpec:
    """One prediction of a head that attribution explains (the Why tab's "Prediction to explain").

    ``builder`` is ``"module:function"`` (or the function itself) with the signature
    ``(loaded, text, text_pair, target, which) -> engine.probes.attribution.targets.Target``; it is imported
    only when an attribution runs, so this module never imports the probes."""

    name: str                          # "fill_mask": the ``task`` of ``attribute`` and of the Why tab's API
    builder: str | Callable[..., Any]  # "engine.probes.attribution.builders:fill_mask_for"
    choice: str                        # the Why tab's dropdown label
    form: Form                         # the Why tab's field labels and placeholders
    needs_pair: str | None = None      # what the second text is, when it is required ("context")
    order: int = 100                   # where it is listed (the built-ins 0-6; then registration order)


def _all_parameters(module: nn.Module) -> list[nn.Parameter]:
    return list(module.parameters())


@dataclass(frozen=True)
class HeadSpec:
    """One task head. ``build(config, model)`` makes its module (after ``model.bert`` exists);
    ``run(model, input)`` is its step in ``BertWithHeads.forward`` and returns its output (with a
    ``loss`` attribute, None without targets)."""

    name: str                          # "mlm", "qa", ...: the key in checkpoints, HeadsOutput and the API
    module: str                        # dotted attribute on BertWithHeads, e.g. "cls.predictions"
    hf_prefix: str                     # transformers' state-dict prefix of the same weights
    hf_class: str                      # the transformers class with this head alone
    noun: str                          # in engine messages: "this model has no {noun} head"
    title: str                         # in the explorer: "masked LM (Fill-mask)"
    build: Callable[[BertConfig, nn.Module], nn.Module]
    run: Callable[[Any, HeadInput], Any]
    pooled: bool = False               # reads the pooled [CLS] vector: needs the pooler (so has its HF class)
    labelled: bool = False             # output width config.num_labels (id2label); read from {prefix}weight
    dropout: bool = False              # the model's classifier dropout runs before it
    choice_input: bool = False         # reads (B, C, S) input_ids (one row per choice), and only those
    trainable: Callable[[nn.Module], list[nn.Parameter]] = _all_parameters   # its own (untied) parameters
    init: Callable[[nn.Module], None] | None = None   # after BERT's initialisation of the whole model
    tied: tuple[str, ...] = ()         # keys under the prefix that are other weights (never saved or loaded)
    hf_num_labels: int | None = None   # transformers sizes it by num_labels: the value export writes
    tried_in: str | None = None        # where the explorer says to try it (None: its title says)
    how_to_get: str | None = None      # the explorer's "to try this, ..." for a model without it
    targets: tuple[str, ...] = ()      # forward() keyword arguments it reads (its labels): in HeadInput.targets
    attribution: tuple[AttributionSpec, ...] = ()   # the predictions attribution can explain

    @property
    def prefix(self) -> str:
        """Our state-dict prefix: ``cls.predictions.``."""
        return self.module + "."


HEADS: dict[str, HeadSpec] = {}
"""The registered heads by name, in canonical order (model construction, export, listings)."""

JOINT_CLASSES: dict[str, tuple[str, ...]] = {"BertForPreTraining": ("mlm", "nsp")}
"""transformers classes with several heads: exported instead of the heads' own classes when a model has them all."""


def register_head(spec: HeadSpec) -> HeadSpec:
    """Add ``spec`` at the end of ``HEADS``; ``ValueError`` if its name or module is taken (``bert`` and
    ``dropout`` are the model's own)."""
    if spec.module.split(".")[0] in ("bert", "dropout"):
        raise ValueError(f"{spec.module!r} is BertWithHeads' own module; put the {spec.name} head elsewhere")
    taken = [s.name for s in HEADS.values() if s.name == spec.name or s.module == spec.module]
    if taken:
        raise ValueError(f"a head named {spec.name!r} or at {spec.module!r} is registered already ({taken[0]})")
    taken = [a.name for a in spec.attribution for s in HEADS.values() for b in s.attribution if a.name == b.name]
    if taken:
        raise ValueError(f"an attribution target named {taken[0]!r} is registered already")
    HEADS[spec.name] = spec
    return spec


def unregister_head(name: str) -> None:
    """Remove the head ``name`` from ``HEADS`` (tests that registered one)."""
    del HEADS[name]


def shared_key_groups(heads: tuple[str, ...] | list[str], specs: Mapping[str, HeadSpec] = HEADS) -> list[list[str]]:
    """Groups of two or more of ``heads`` that transformers stores under the same prefix (``classifier.``);
    ``specs``: the model's table of heads (a family's, ``heads.head_specs_for``)."""
    groups: dict[str, list[str]] = {}
    for name in (h for h in specs if h in heads):
        groups.setdefault(specs[name].hf_prefix, []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def target_arguments(specs: Mapping[str, HeadSpec] = HEADS) -> tuple[str, ...]:
    """Every forward() keyword argument a head of ``specs`` (default: the registered ones) reads
    (``HeadSpec.targets``), in registry order."""
    return tuple(dict.fromkeys(name for spec in specs.values() for name in spec.targets))


def attribution_targets() -> dict[str, tuple[str, AttributionSpec]]:
    """Every registered head's attribution targets: name -> (head, spec), in ``order`` then registry order."""
    found = [(a.order, i, a.name, head, a) for i, (head, spec) in enumerate(HEADS.items()) for a in spec.attribution]
    return {name: (head, a) for _, _, name, head, a in sorted(found, key=lambda row: row[:2])}


_BUILDERS = "engine.probes.attribution.builders:"


def _linear(width: Callable[[BertConfig], int]) -> Callable[[BertConfig, nn.Module], nn.Module]:
    """A builder of ``nn.Linear(hidden_size, width(config))``."""
    return lambda config, model: nn.Linear(config.hidden_size, width(config))


def _run_mlm(model: Any, x: HeadInput) -> Any:
    t = x.targets
    return model.masked_lm(x.hidden, t.get("labels"), t.get("mlm_positions"), sparse=bool(t.get("sparse_mlm")))


_BUILT_IN = (
    HeadSpec("mlm", "cls.predictions", "cls.predictions.", "BertForMaskedLM", "masked-LM", "masked LM (Fill-mask)",
             build=lambda config, model: BertLMPredictionHead(config, model.bert.embeddings.word_embeddings),
             run=_run_mlm, trainable=lambda head: head.own_parameters(), init=lambda head: head.reset_bias(),
             tied=("decoder.weight",), targets=("labels",), attribution=(AttributionSpec(
                 "fill_mask", _BUILDERS + "fill_mask_for", "Fill-mask: a token at a [MASK]", order=0, form=(
                     "Text with [MASK]", "The capital of France is [MASK].", "Text pair (optional, segment B)", "",
                     "a token, e.g. paris (empty: the top prediction)", "Which [MASK]: 1, 2, … (0 = the first)")),)),
    HeadSpec("nsp", "cls.seq_relationship", "cls.seq_relationship.", "BertForNextSentencePrediction",
             "next-sentence", "next sentence (NSP)", build=_linear(lambda config: 2),
             run=lambda model, x: model.next_sentence(x.pooled, x.targets.get("next_sentence_label")), pooled=True,
             targets=("next_sentence_label",), attribution=(AttributionSpec(
                 "next_sentence", _BUILDERS + "next_sentence_for", "Next sentence: IsNext / NotNext", order=3,
                 needs_pair="sentence B", form=("Sentence A", "The cat sat on the mat.", "Sentence B",
                                                "Soon it was fast asleep.", "IsNext or NotNext (empty: IsNext)",
                                                "(not used)")),),
             how_to_get="pretrain one with next-sentence prediction in the Training tab (the bundled default "
                        "model has one)"),
    HeadSpec("qa", "qa_outputs", "qa_outputs.", "BertForQuestionAnswering", "question-answering (span)",
             "question answering (QA)", build=_linear(lambda config: 2), hf_num_labels=2,
             run=lambda model, x: model.answer_span(x.hidden, x.targets.get("start_positions"),
                                                    x.targets.get("end_positions")),
             targets=("start_positions", "end_positions"), attribution=tuple(AttributionSpec(
                 f"qa_{side}", _BUILDERS + f"qa_{side}_for", f"QA: where the answer {side}s", order=order,
                 needs_pair="context", form=("Question", "What is the capital of France?", "Context",
                                             "Paris is the capital of France.",
                                             "(not used: the best answer is explained)", "(not used)"))
                 for order, side in ((1, "start"), (2, "end")))),
    HeadSpec("classifier", "classifier", "classifier.", "BertForSequenceClassification", "sequence-classification",
             "sequence classification", build=_linear(lambda config: config.num_labels),
             run=lambda model, x: model.classify(x.pooled, x.targets.get("class_labels")),
             pooled=True, labelled=True, dropout=True, tried_in="Heads › Classify", targets=("class_labels",),
             attribution=(AttributionSpec("classify", _BUILDERS + "classify_for", "Classify: a label", order=4, form=(
                 "Text", "A wonderful, moving film.", "Text pair (optional)", "", "a label (empty: the predicted one)",
                 "(not used)")),),
             how_to_get="fine-tune it for sequence classification in the Fine-tune tab"),
    HeadSpec("token_classifier", "token_classifier", "classifier.", "BertForTokenClassification",
             "token-classification", "token classification", build=_linear(lambda config: config.num_labels),
             run=lambda model, x: model.classify_tokens(x.hidden, x.targets.get("token_labels")),
             labelled=True, dropout=True, tried_in="Heads › Tag words", targets=("token_labels",),
             attribution=(AttributionSpec("tag", _BUILDERS + "tag_for", "Tag words: a word's tag", order=5, form=(
                 "Text", "Walter lives in Paris.", "(not used)", "", "a tag, e.g. B-LOC (empty: the predicted one)",
                 "Which word: 1, 2, … (0 = the first not tagged O)")),),
             how_to_get="fine-tune it for token classification (tagging) in the Fine-tune tab"),
    HeadSpec("multiple_choice", "multiple_choice", "classifier.", "BertForMultipleChoice", "multiple-choice",
             "multiple choice", build=_linear(lambda config: 1),
             run=lambda model, x: model.score_choices(x.pooled, x.choices, x.targets.get("choice_labels")),
             pooled=True, dropout=True, choice_input=True, tried_in="Heads › Choose", targets=("choice_labels",),
             attribution=(AttributionSpec("choose", _BUILDERS + "choose_for", "Choose: a choice", order=6,
                                          needs_pair="choices", form=(
                 "Context", "The cat sat on the mat.", "Choices, one per line", "It fell asleep.\nIt sang an aria.",
                 "(not used: pick the choice below)", "Which choice: 1, 2, … (0 = the model's pick)")),),
             how_to_get="fine-tune it for multiple choice in the Fine-tune tab"),
)
for _spec in _BUILT_IN:
    register_head(_spec)
