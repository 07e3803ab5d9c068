"""An experiment's numbers lined up: per arm the source's columns beside ours (mean ± spread over seeds), a verdict
per claim in plain words, and the same as CSV and JSON.

The spread is the seeds' sample standard deviation. A claim that one arm beats another is "reproduced at this scale"
when ours differs the same way by more than the seeds' spread, "not reproduced" when it differs the other way by
more, and "within the seeds' spread" otherwise; a claim that two arms are about the same is "reproduced at this
scale" when they differ by no more than the spread. With one seed there is no spread: the verdict says so and only
gives the direction. The verdicts are computed, never tuned to agree.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from engine.experiments.definitions import METRICS, Experiment, Scale
from engine.experiments.runner import ArmResult


@dataclass(frozen=True)
class Summary:
    """One arm's metric over the seeds: mean, spread (None with one seed) and how many seeds."""

    mean: float
    spread: float | None
    seeds: int

    def text(self) -> str:
        """``71.2 ± 0.8`` (percent), or ``71.2`` with one seed."""
        shown = f"{100 * self.mean:.1f}"
        return shown if self.spread is None else f"{shown} ± {100 * self.spread:.1f}"


def summarize(results: Sequence[ArmResult], arm: str, metric: str) -> Summary | None:
    """The arm's ``metric`` over its seeds (None where it does not apply)."""
    values = [r.metrics.get(metric) for r in results if r.arm == arm]
    values = [v for v in values if isinstance(v, (int, float))]
    if not values:
        return None
    spread = statistics.stdev(values) if len(values) > 1 else None
    return Summary(statistics.fmean(values), spread, len(values))


def verdict(results: Sequence[ArmResult], experiment: Experiment, claim_index: int) -> str:
    """The verdict on one claim, in plain words, with the numbers it rests on."""
    claim = experiment.claims[claim_index]
    first, second = summarize(results, claim.first, claim.metric), summarize(results, claim.second, claim.metric)
    if first is None or second is None:
        return "not measured"
    diff = first.mean - second.mean
    numbers = f"{METRICS[claim.metric]} {first.text()} vs {second.text()}"
    if first.spread is None or second.spread is None:
        direction = "the same way as the paper" if (diff > 0) == (claim.kind == "better") else "not as the paper"
        return f"one seed, no spread to judge by ({numbers}: {direction})"
    spread = max(first.spread, second.spread)
    if claim.kind == "same":
        word = "reproduced at this scale" if abs(diff) <= spread else "not reproduced"
    elif abs(diff) <= spread:
        word = "within the seeds' spread"
    else:
        word = "reproduced at this scale" if diff > 0 else "not reproduced"
    return f"{word} ({numbers})"


def scale_line(experiment: Experiment, scale: Scale, results: Sequence[ArmResult]) -> str:
    """What ours is: parameters, steps, tokens seen per arm, seeds."""
    parameters = max((r.parameters for r in results), default=0)
    tokens = max((r.tokens_seen for r in results), default=0)
    return (f"scale: {scale.preset} preset ({parameters / 1e6:.2f}M parameters), {scale.steps:,} steps of "
            f"{scale.batch_size} × {scale.seq_length} tokens ({tokens / 1e6:.2f}M tokens seen per arm), "
            f"{scale.seeds} seed(s), the first {scale.max_documents} documents of Shakespeare; ours in percent")


def _paper(value: float | str) -> str:
    """A paper's number as printed (84.2, 5.84), or its text (a row's name)."""
    return value if isinstance(value, str) else f"{value:g}"


def table(experiment: Experiment, scale: Scale, results: Sequence[ArmResult]) -> str:
    """The markdown table: each arm, the paper's columns, ours; then the verdicts and the scale."""
    ours = list(METRICS)
    header = ["arm", *(f"paper: {c}" for c in experiment.paper_columns), *(f"ours: {METRICS[m]}" for m in ours)]
    lines = [f"{experiment.title} ({experiment.source})", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for arm in experiment.arms:
        paper = [_paper(arm.paper[c]) if c in arm.paper else "—" for c in experiment.paper_columns]
        mine = [(s.text() if (s := summarize(results, arm.name, m)) else "—") for m in ours]
        lines.append("| " + " | ".join([arm.label, *paper, *mine]) + " |")
    lines += ["", scale_line(experiment, scale, results), ""]
    lines += [f"- {claim.text}: **{verdict(results, experiment, i)}**" for i, claim in enumerate(experiment.claims)]
    if experiment.note:
        lines += ["", experiment.note]
    return "\n".join(lines)


def as_csv(experiment: Experiment, results: Sequence[ArmResult]) -> str:
    """One row per arm and seed: the arm, the seed, our metrics (fractions), the paper's columns."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["arm", "seed", *METRICS, *experiment.paper_columns])
    for r in results:
        paper = experiment.arm(r.arm).paper
        writer.writerow([r.arm, r.seed, *(r.metrics.get(m) for m in METRICS),
                         *(paper.get(c) for c in experiment.paper_columns)])
    return out.getvalue()


def as_json(experiment: Experiment, scale: Scale, results: Sequence[ArmResult]) -> str:
    """Everything: the experiment, the scale, each arm's seeds and summaries, the verdicts."""
    arms = [{"arm": arm.name, "label": arm.label, "paper": dict(arm.paper),
             "ours": {m: (vars(s) if (s := summarize(results, arm.name, m)) else None) for m in METRICS},
             "seeds": [r.metrics for r in results if r.arm == arm.name]} for arm in experiment.arms]
    claims = [{"claim": c.text, "verdict": verdict(results, experiment, i)} for i, c in enumerate(experiment.claims)]
    return json.dumps({"experiment": experiment.name, "source": experiment.source, "scale": vars(scale),
                       "arms": arms, "claims": claims}, indent=1)
