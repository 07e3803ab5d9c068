"""What an experiment is: arms that differ in one factor, the scale they run at, and the claims they test."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# What every arm is measured by (``engine.experiments.evaluation``), higher is better for each.
METRICS: dict[str, str] = {
    "masked_acc": "held-out masked-token accuracy",       # every chosen token [MASK]ed, on text no arm trained on
    "pos_acc": "part-of-speech word accuracy",            # fine-tuned on the bundled UD English EWT sample
    "sentiment_acc": "sentiment accuracy",                # fine-tuned on the bundled 50 sentences (10 held out)
    "pair_acc": "sentence-pair (QNLI-style) accuracy",    # fine-tuned on 1,000 SQuAD question-sentence pairs
    "best_head_acc": "syntax: each relation's best attention head, mean accuracy",   # the Syntax tab's best-head
                                                          # table averaged over its relations (syntax_metrics)
    "probe_best_layer_acc": "syntax: UPOS layer probe at its best layer",   # the tab's probe where selectivity peaks
    "pos_features_acc": "part-of-speech word accuracy on frozen features (last four layers concatenated)",
                                                          # ^ a classifier on the model's frozen vectors (features.py)
    "ner_f1": "named-entity F1 (WNUT 17 posts)",          # fine-tuned on 2,000 posts' BIO tags, seqeval's entity F1
    "ner_features_f1": "named-entity F1 on frozen features (last four layers concatenated)",
}
OPTIONAL_METRICS = ("pos_features_acc", "ner_f1", "ner_features_f1")   # measured only where an experiment asks
                                                                      # (``extra_metrics``)


@dataclass(frozen=True)
class Scale:
    """How big every arm of an experiment runs: the model preset, pretraining steps and text, seeds, and the
    fixed fine-tuning budget of the downstream evaluation."""

    preset: str = "tiny"
    steps: int = 600
    seeds: int = 2
    max_documents: int = 200          # the built-in corpus's first N documents are the pretraining text
    eval_documents: int = 60          # the next N, which no arm trains on, measure the masked-token accuracy
    seq_length: int = 64
    batch_size: int = 16
    learning_rate: float = 5e-4
    vocab_size: int = 4000
    downstream_steps: int = 60
    downstream_learning_rate: float = 5e-4
    feature_classifier: str = "logistic"   # what reads frozen features: "logistic" or the paper's "bilstm"

    def with_changes(self, **changes: Any) -> "Scale":
        """This scale with the given fields changed (None values ignored: a flag not given)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True)
class Arm:
    """One arm: its folder name, how it is shown, the training fields, pretraining settings and job fields it
    changes (``TrainingConfig`` fields such as ``nsp``; ``PretrainingSettings`` fields such as ``mask_mix``;
    ``JobSpec`` fields such as ``model_overrides``), and the source's numbers for it by column."""

    name: str
    label: str
    training: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    paper: Mapping[str, float | str] = field(default_factory=dict)
    job: Mapping[str, Any] = field(default_factory=dict)
    features: str = ""                # "" fine-tunes the model; a recipe of engine.experiments.features (e.g.
                                      # "concat-last-4") fits a classifier on its frozen features instead
    steps_for: Callable[[Scale], int] | None = None   # the arm's own pretraining steps at a scale (None: the
                                                      # scale's), e.g. fewer for equal compute (experiments.compute)
    tokens_like: str = ""             # another arm's name: this arm's batch grows to see as many tokens per step as
                                      # that arm's inputs (RoBERTa's shorter inputs, engine.experiments.token_budget)

    def steps(self, scale: Scale) -> int:
        """The pretraining steps this arm runs at ``scale``."""
        return scale.steps if self.steps_for is None else self.steps_for(scale)


CLAIM_KINDS = ("better", "same", "not-worse")


@dataclass(frozen=True)
class Claim:
    """A claim of the source, tested on one of our ``METRICS``: ``first`` beats ``second`` (``kind`` "better"), the
    two are about the same (``kind`` "same"), or ``first`` matches or beats ``second`` ("not-worse": the source's
    "matches or improves", "at least as good"). ``at`` says where: () the final model; one fraction of the
    pretraining steps, the checkpoint there (one of the experiment's ``measure_at``); two, the gain between them."""

    text: str
    first: str
    second: str
    metric: str
    kind: str = "better"
    at: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.at) > 2 or not all(0 < f <= 1 for f in self.at):
            raise ValueError(f"a claim's at is (), one fraction of the steps or two, not {self.at!r}")
        if self.kind not in CLAIM_KINDS:
            raise ValueError(f"a claim's kind is one of {', '.join(CLAIM_KINDS)}, not {self.kind!r}")
        if self.metric not in METRICS:
            raise ValueError(f"a claim's metric is one of {', '.join(METRICS)}, not {self.metric!r}")


@dataclass(frozen=True)
class Experiment:
    """A named experiment: its source, what differs between its arms, the arms, the source's columns, the claims
    tested, and its ``--quick`` and default scales."""

    name: str
    title: str
    source: str                       # the paper and table, e.g. "Devlin et al. 2019, Table 8"
    factor: str                       # what differs between the arms
    arms: tuple[Arm, ...]
    paper_columns: tuple[str, ...]
    claims: tuple[Claim, ...]
    quick: Scale = Scale()
    full: Scale = Scale(steps=3000, seeds=3, max_documents=600, eval_documents=100)
    note: str = ""                    # how ours differs from the source's setting
    measure_at: tuple[float, ...] = ()    # fractions of the steps whose checkpoints are measured too (a series)
    measure_metrics: tuple[str, ...] = ("pos_acc",)   # what is measured at them
    extra_metrics: tuple[str, ...] = ()   # of ``OPTIONAL_METRICS``, those this experiment measures too
    revision: int = 0                 # raised when the arms' pretraining changes meaning (a new folder: older numbers
                                      # are not read back as the new ones)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics every arm of this experiment is measured by (its table's columns), in ``METRICS`` order."""
        return tuple(m for m in METRICS if m not in OPTIONAL_METRICS or m in self.extra_metrics)

    def __post_init__(self) -> None:
        if set(self.extra_metrics) - set(OPTIONAL_METRICS):
            raise ValueError(f"experiment {self.name}: extra_metrics are of {', '.join(OPTIONAL_METRICS)}")
        if not all(0 < f <= 1 for f in self.measure_at) or set(self.measure_metrics) - set(self.metrics):
            raise ValueError(f"experiment {self.name}: measure_at holds fractions in (0, 1], measure_metrics "
                             f"names of {', '.join(METRICS)}")
        for claim in self.claims:
            if claim.at and (set(claim.at) - {*self.measure_at, 1.0} or claim.metric not in self.measure_metrics):
                raise ValueError(f"experiment {self.name}: a claim is about a checkpoint or metric not measured")
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"experiment {self.name}: two arms share a name")
        for claim in self.claims:
            if claim.metric not in self.metrics:
                raise ValueError(f"experiment {self.name}: a claim is about {claim.metric}, which it does not measure")
            if {claim.first, claim.second} - set(names):
                raise ValueError(f"experiment {self.name}: a claim names an arm it does not have")
        likes = {arm.name: arm.tokens_like for arm in self.arms if arm.tokens_like}
        for name in likes:
            seen = {name}
            while name in likes:              # follow the chain: it must end at an arm of the scale's batch
                name = likes[name]
                if name not in names or name in seen:
                    raise ValueError(f"experiment {self.name}: an arm's tokens_like names no other arm of it, or "
                                     f"goes round in a circle")
                seen.add(name)

    def arm(self, name: str) -> Arm:
        """The arm called ``name``."""
        return next(arm for arm in self.arms if arm.name == name)

    def scale(self, quick: bool, **changes: Any) -> Scale:
        """The ``--quick`` or default scale, with the flags' changes."""
        return (self.quick if quick else self.full).with_changes(**changes)
