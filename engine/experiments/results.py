"""An experiment's numbers lined up: per arm the source's columns beside ours (mean ± spread over seeds), a verdict
per claim in plain words, and the same as CSV and JSON.

The spread is the seeds' sample standard deviation. A claim that one arm beats another is "reproduced at this scale"
when ours differs the same way by more than the seeds' spread, "not reproduced" when it differs the other way by
more, and "within the seeds' spread" otherwise; a claim that two arms are about the same is "reproduced at this
scale" when they differ by no more than the spread. With one seed there is no spread: the verdict says so and only
gives the direction. The verdicts are computed, never tuned to agree.

An experiment measured over its pretraining (``measure_at``) also gets a table of each arm's numbers at each
measured step, columns ``<metric>@step-<n>`` in the CSV and a ``series`` in the JSON; a claim about a checkpoint
(``Claim.at``) compares the arms there, or the gains between two checkpoints.

The syntax metrics (``syntax_metrics``) carry what they rest on: the CSV's ``probe_best_layer`` and ``best_heads``
(``det 2-1; ...``, layer-head per relation) columns, the JSON's ``seed_details`` (``best_heads`` as
``{relation: [layer, head]}``, ``probe_best_layer``), and a line under the table with the fixed-offset baseline
and each seed's best probe layer.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from engine.experiments.definitions import METRICS, Claim, Experiment, Scale
from engine.experiments.runner import ArmResult
from engine.experiments.series import measured_steps
from engine.experiments.syntax_metrics import SENTENCES, head_text


@dataclass(frozen=True)
class Summary:
    """One arm's metric over the seeds: mean, spread (None with one seed) and how many seeds."""

    mean: float
    spread: float | None
    seeds: int

    def text(self, signed: bool = False) -> str:
        """``71.2 ± 0.8`` (percent), or ``71.2`` with one seed (``+3.1`` when ``signed``: a gain)."""
        shown = f"{100 * self.mean:+.1f}" if signed else f"{100 * self.mean:.1f}"
        return shown if self.spread is None else f"{shown} ± {100 * self.spread:.1f}"


def summarize(results: Sequence[ArmResult], arm: str, metric: str) -> Summary | None:
    """The arm's ``metric`` over its seeds (None where it does not apply)."""
    return _summary([r.metrics.get(metric) for r in results if r.arm == arm])


def _summary(found: Sequence[float | None]) -> Summary | None:
    values = [v for v in found if isinstance(v, (int, float))]
    if not values:
        return None
    spread = statistics.stdev(values) if len(values) > 1 else None
    return Summary(statistics.fmean(values), spread, len(values))


def _at(result: ArmResult, experiment: Experiment, claim: Claim, fraction: float) -> float | None:
    """One seed's ``claim.metric`` at the checkpoint of ``fraction`` of its steps (1.0: the final model)."""
    if fraction == 1.0:
        return result.metrics.get(claim.metric)
    step = measured_steps(experiment.measure_at, result.steps).get(fraction)
    return result.series.get(claim.metric, {}).get(step) if step is not None else None


def claim_value(result: ArmResult, experiment: Experiment, claim: Claim) -> float | None:
    """What ``claim`` compares for one seed: the final metric, the metric at a checkpoint, or the gain between
    two checkpoints (None where one is missing)."""
    if not claim.at:
        return result.metrics.get(claim.metric)
    found = [_at(result, experiment, claim, fraction) for fraction in claim.at]
    if any(v is None for v in found):
        return None
    return found[0] if len(found) == 1 else found[1] - found[0]


def claim_label(experiment: Experiment, claim: Claim, steps: int) -> str:
    """What the claim's numbers are: ``part-of-speech word accuracy at step 150``, ``... gained from step 150 to
    600``."""
    where = [measured_steps(experiment.measure_at, steps).get(f, steps) for f in claim.at]
    if len(where) == 1:
        return f"{METRICS[claim.metric]} at step {where[0]:,}"
    if len(where) == 2:
        return f"{METRICS[claim.metric]} gained from step {where[0]:,} to {where[1]:,}"
    return METRICS[claim.metric]


def verdict(results: Sequence[ArmResult], experiment: Experiment, claim_index: int) -> str:
    """The verdict on one claim, in plain words, with the numbers it rests on."""
    claim = experiment.claims[claim_index]
    first, second = (_summary([claim_value(r, experiment, claim) for r in results if r.arm == arm])
                     for arm in (claim.first, claim.second))
    if first is None or second is None:
        return "not measured"
    diff = first.mean - second.mean
    gain = len(claim.at) == 2
    label = claim_label(experiment, claim, max((r.steps for r in results), default=0))
    numbers = f"{label}{':' if claim.at else ''} {first.text(gain)} vs {second.text(gain)}"
    if first.spread is None or second.spread is None:
        agrees = diff >= 0 if claim.kind == "not-worse" else (diff > 0) == (claim.kind == "better")
        direction = "the same way as the paper" if agrees else "not as the paper"
        return f"one seed, no spread to judge by ({numbers}: {direction})"
    spread = max(first.spread, second.spread)
    if claim.kind == "same":
        word = "reproduced at this scale" if abs(diff) <= spread else "not reproduced"
    elif claim.kind == "not-worse":                       # matches (within the spread) or beats
        word = "reproduced at this scale" if diff >= -spread else "not reproduced"
    elif abs(diff) <= spread:
        word = "within the seeds' spread"
    else:
        word = "reproduced at this scale" if diff > 0 else "not reproduced"
    return f"{word} ({numbers})"


def scale_line(experiment: Experiment, scale: Scale, results: Sequence[ArmResult]) -> str:
    """What ours is: parameters, steps, tokens seen per arm, seeds."""
    parameters = max((r.parameters for r in results), default=0)
    tokens = max((r.tokens_seen for r in results), default=0)
    batches = {r.arm: r.tokens_seen // max(1, r.steps * scale.seq_length) for r in results}
    grown = ", ".join(f"{arm.name} {batches[arm.name]}" for arm in experiment.arms
                      if arm.tokens_like and arm.name in batches)
    return (f"scale: {scale.preset} preset ({parameters / 1e6:.2f}M parameters), {scale.steps:,} steps of "
            f"{scale.batch_size} × {scale.seq_length} tokens{f' (grown batches: {grown})' if grown else ''} "
            f"({tokens / 1e6:.2f}M tokens seen per arm at most), "
            f"{scale.seeds} seed(s), the first {scale.max_documents} documents of Shakespeare"
            f"{'; frozen features read by the paper BiLSTM' if scale.feature_classifier == 'bilstm' else ''}"
            "; ours in percent")


def _paper(value: float | str) -> str:
    """A paper's number as printed (84.2, 5.84), or its text (a row's name)."""
    if isinstance(value, str):
        return value
    return f"{value:.1f}" if isinstance(value, float) and value.is_integer() else f"{value:g}"   # 84.0, not 84


def series_steps(results: Sequence[ArmResult], metric: str) -> list[int]:
    """Every pretraining step at which some arm-seed has ``metric`` measured, in order."""
    return sorted({step for r in results for step in r.series.get(metric, {})})


def summarize_series(results: Sequence[ArmResult], arm: str, metric: str) -> dict[int, Summary]:
    """The arm's ``metric`` at each measured step, over its seeds."""
    found = {step: _summary([r.series.get(metric, {}).get(step) for r in results if r.arm == arm])
             for step in series_steps(results, metric)}
    return {step: summary for step, summary in found.items() if summary is not None}


def series_table(experiment: Experiment, results: Sequence[ArmResult]) -> list[str]:
    """Markdown lines: per measured metric, each arm's value at each measured step (none without ``measure_at``)."""
    lines: list[str] = []
    for metric in experiment.measure_metrics if experiment.measure_at else ():
        steps = series_steps(results, metric)
        if not steps:
            continue
        lines += ["", f"Over pretraining: ours, {METRICS[metric]} of the checkpoint at each step, measured the same "
                  "way as the final model", "", "| arm | " + " | ".join(f"step {s:,}" for s in steps) + " |",
                  "|" + "---|" * (len(steps) + 1)]
        for arm in experiment.arms:
            found = summarize_series(results, arm.name, metric)
            lines.append("| " + " | ".join([arm.label, *(found[s].text() if s in found else "—" for s in steps)])
                         + " |")
    return lines


def table(experiment: Experiment, scale: Scale, results: Sequence[ArmResult]) -> str:
    """The markdown table: each arm, the paper's columns, ours; then the verdicts and the scale."""
    ours = list(experiment.metrics)
    header = ["arm", *(f"paper: {c}" for c in experiment.paper_columns), *(f"ours: {METRICS[m]}" for m in ours)]
    lines = [f"{experiment.title} ({experiment.source})", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for arm in experiment.arms:
        paper = [_paper(arm.paper[c]) if c in arm.paper else "—" for c in experiment.paper_columns]
        mine = [(s.text() if (s := summarize(results, arm.name, m)) else "—") for m in ours]
        lines.append("| " + " | ".join([arm.label, *paper, *mine]) + " |")
    lines += series_table(experiment, results)
    lines += syntax_lines(experiment, results)
    lines += ["", scale_line(experiment, scale, results), ""]
    lines += [f"- {claim.text}: **{verdict(results, experiment, i)}**" for i, claim in enumerate(experiment.claims)]
    if experiment.note:
        lines += ["", experiment.note]
    return "\n".join(lines)


def syntax_lines(experiment: Experiment, results: Sequence[ArmResult]) -> list[str]:
    """Under the table: what the syntax columns are measured on, the fixed-offset baseline they stand beside and
    each arm's best probe layer by seed (none when no arm-seed has them)."""
    baselines = [r.details["best_head_baseline"] for r in results if "best_head_baseline" in r.details]
    if not baselines:
        return []
    layers = []
    for arm in experiment.arms:
        found = [str(r.details["probe_best_layer"]) for r in results
                 if r.arm == arm.name and "probe_best_layer" in r.details]
        if found:
            layers.append(f"{arm.label} {', '.join(found)}")
    return ["", f"Syntax columns: the Syntax tab's measures on the first {SENTENCES} sentences of the bundled UD "
            f"English EWT sample; always pointing a fixed number of words away (each relation's best offset) averages "
            f"{100 * statistics.fmean(baselines):.1f}; the UPOS probe's best layer (0 = the embeddings) by seed: "
            + "; ".join(layers) + " (each relation's best head, as layer-head, is in the CSV and JSON)."]


def as_csv(experiment: Experiment, results: Sequence[ArmResult]) -> str:
    """One row per arm and seed: the arm, the seed, our metrics (fractions), the paper's columns, the syntax
    metrics' best probe layer and best head per relation; then each measured checkpoint's metrics
    (``<metric>@step-<n>``, when the experiment has ``measure_at``)."""
    out = io.StringIO()
    writer = csv.writer(out)
    points = [(m, step) for m in experiment.metrics for step in series_steps(results, m)]
    writer.writerow(["arm", "seed", *experiment.metrics, *experiment.paper_columns, "probe_best_layer", "best_heads",
                     *(f"{m}@step-{n}" for m, n in points)])
    for r in results:
        paper = experiment.arm(r.arm).paper
        writer.writerow([r.arm, r.seed, *(r.metrics.get(m) for m in experiment.metrics),
                         *(paper.get(c) for c in experiment.paper_columns), r.details.get("probe_best_layer"),
                         head_text(r.details), *(r.series.get(m, {}).get(n) for m, n in points)])
    return out.getvalue()


def as_json(experiment: Experiment, scale: Scale, results: Sequence[ArmResult]) -> str:
    """Everything: the experiment, the scale, each arm's seeds and summaries, the verdicts."""
    arms = [{"arm": arm.name, "label": arm.label, "paper": dict(arm.paper),
             "ours": {m: (vars(s) if (s := summarize(results, arm.name, m)) else None) for m in experiment.metrics},
             "seeds": [r.metrics for r in results if r.arm == arm.name],
             "seed_details": [{"seed": r.seed, **r.details} for r in results if r.arm == arm.name],
             "series": {m: {str(step): vars(s) for step, s in summarize_series(results, arm.name, m).items()}
                        for m in experiment.metrics if series_steps(results, m)},
             "seed_series": [r.series for r in results if r.arm == arm.name]} for arm in experiment.arms]
    claims = [{"claim": c.text, "verdict": verdict(results, experiment, i)} for i, c in enumerate(experiment.claims)]
    return json.dumps({"experiment": experiment.name, "source": experiment.source, "scale": vars(scale),
                       "arms": arms, "claims": claims}, indent=1)
