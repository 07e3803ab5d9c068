"""The arms' pretraining curves overlaid, as points for the shared live-curves widget (``assets/curves_view.js``,
``explorer.runs.curves_view``): one chart, "MLM loss per arm", whose series are the arm-seeds (a colour per arm,
seed 0 solid and the other seeds dotted), each step's training MLM loss drawn thin and its running mean bold, as
on the Training tab. Arms that share their pretraining (one model used several ways: BERT's Table 7) draw it
once, named after what shares it ("one pretraining shared by all 7 arms").

A browser is sent everything once (``reset``, with the chart), then on each tick only the points its arm-seeds
logged since (per series: the history's version and the last step it was sent); a tick with nothing new sends
nothing. A run whose ``metrics.jsonl`` was rewritten (resumed: the records past its checkpoint dropped) sends
everything again."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from explorer.experiments.background import ExperimentJob
from explorer.experiments.progress import ArmSeed, CurveReaders, pretraining_runs
from explorer.runs.curves import WINDOW, Chart, chart_specs, running_means, series_id
from explorer.runs.plots import MAX_POINTS, downsample

KEY = "mlm_loss"                  # the pretraining curve every arm has
COLORS = ("#4f6bed", "#f28e2b", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
CHART_TITLE = "MLM loss per arm"


def series_key(one: ArmSeed) -> str:
    """The name an arm-seed's points travel under (letters, digits and ``_`` only: the page names attributes
    after it)."""
    return f"arm{one.index}_seed{one.seed}"


def run_label(job: ExperimentJob, one: ArmSeed, sharing: int) -> str:
    """What a pretraining run's series is called: its arm's label, or what shares it."""
    arms = len(job.experiment.arms)
    if sharing == 1:
        return one.arm.label
    if sharing == arms:
        return f"one pretraining shared by all {arms} arms"
    return f"{one.arm.label} (pretraining shared by {sharing} arms)"


def chart(root: Path, job: ExperimentJob) -> Chart:
    """The one chart: a series per pretraining run (an arm-seed's, or one that several arms share), named by
    ``run_label`` (and the seed when there are several)."""
    several = job.scale.seeds > 1
    series = tuple(("train", series_key(one),
                    run_label(job, one, sharing) + (f" · seed {one.seed}" if several else ""),
                    COLORS[one.index % len(COLORS)], "solid" if one.seed == 0 else "dot")
                   for one, sharing in pretraining_runs(root, job))
    return Chart(CHART_TITLE, "cross-entropy", series, empty="No arm has logged a step yet")


def _mlm_rows(records: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(step, loss, running mean) of each training record with an MLM loss."""
    return running_means(records, KEY, WINDOW)


def curves_update(readers: CurveReaders, root: Path, job: ExperimentJob,
                  seen: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The curves value for a browser that was last sent ``seen`` (None: nothing), or None when it has every
    point; and what it has been sent after this tick."""
    reset = not seen or seen.get("key") != job.key
    sent: dict[str, list[Any]] = {} if reset else {k: list(v) for k, v in seen["sent"].items()}
    histories = {}
    for one, _ in pretraining_runs(root, job):
        history = readers.history(one.pretrain_dir)
        sid = series_id("train", series_key(one))
        histories[sid] = history
        before = sent.get(sid)
        if before is not None and before[0] != history.clears:      # its file was rewritten: start over
            reset = True
    if reset:
        sent = {}
    points: dict[str, list[list[float]]] = {}
    for sid, history in histories.items():
        before = sent.get(sid)
        if before is not None and (before[0], before[1]) == history.version:
            continue                                                   # nothing read since
        last = before[2] if before is not None else None
        rows = [row for row in _mlm_rows(history.shown()) if last is None or row[0] > last]
        sent[sid] = [history.clears, history.added, rows[-1][0] if rows else last]
        if not rows:
            continue
        steps, values, means = (list(column) for column in zip(*rows))
        if len(steps) > MAX_POINTS:
            kept, _ = downsample(list(range(len(steps))), values, MAX_POINTS)
            steps, values, means = ([column[i] for i in kept] for column in (steps, values, means))
        points[sid] = [steps, values, means]
    now = {"key": job.key, "sent": sent}
    if not reset and not points:
        return None, now
    value: dict[str, Any] = {"kind": "curves", "run": job.key, "reset": reset, "next": 0, "points": points,
                             "window": WINDOW}
    if reset:
        value["charts"] = chart_specs([chart(root, job)])
    return value, now
