"""The Experiments tab's live view: what each open browser polls, sent only when it changed (as the Training
tab's ``explorer.training.live``). A browser keeps the versions it was last sent (``Seen``, in a ``gr.State``):
the status (the runner's version, the arm-seed being worked on and its step, how many are measured), the curves
(``explorer.experiments.curves``: per series what it has) and the table (the numbers it was drawn from);
``live_update`` sends ``gr.skip()`` for every output whose version did not move.

The table is ``engine.experiments.results.table`` (ours beside the paper's, the scale, a verdict per claim) over
the arm-seeds measured so far; with it come three files to download: the table as CSV (one row per arm and seed)
and as JSON (everything, with the verdicts), and the curves as CSV (every logged MLM loss of every arm-seed)."""
from __future__ import annotations

import csv
import io
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import gradio as gr

from engine.experiments import results as shown
from explorer.experiments.background import (ENDING, FAILED, FINISHED, IDLE, STOPPED, TRAINING, ExperimentJob,
                                              ExperimentRunner, RunnerStatus)
from explorer.experiments.curves import curves_update
from explorer.experiments.progress import CurveReaders, Progress, latest_step, pretraining_runs, progress

EXPORT_DIR = Path(tempfile.gettempdir()) / "bert-explorer-experiments"   # one set of files per experiment
LIVE_OUTPUTS = 4           # status, curves, table, downloads
SETTLE_S = 5.0             # the tick goes on this long after an experiment ended (its last points are read)
NO_EXPERIMENT = "No experiment started yet: choose one above and press **Start**."
NO_TABLE = "The table appears here once the first arm is measured (its pretraining, then its fine-tuning runs)."
STATES = {TRAINING: "⏳ **Training**", ENDING: "⏹ **Stopping**", STOPPED: "⏸ **Stopped**",
          FINISHED: "✅ **Finished**", FAILED: "⚠️ **Failed**", IDLE: "**Idle**"}

Seen = dict[str, Any]      # output group -> the version last sent to this browser


def _scale_words(job: ExperimentJob) -> str:
    s = job.scale
    return (f"{job.experiment.name}: {len(job.experiment.arms)} arms × {s.seeds} seed(s), {s.steps:,} pretraining "
            f"steps each ({s.preset} preset)")


def status_markdown(st: RunnerStatus, found: Progress | None, step: int | None) -> str:
    """The status line: the state, the experiment and its scale, the arm-seed being worked on with its step, how
    many are measured, and the last thing the experiment said (or the error it failed with)."""
    if st.job is None or found is None:
        return NO_EXPERIMENT
    lines = [f"{STATES.get(st.state, st.state)} · {_scale_words(st.job)} · {len(found.results)} of {found.total} "
             "arm-seeds measured"]
    if found.current is not None and st.state != FINISHED:
        where = f"step {step:,} / {st.job.scale.steps:,}" if step is not None else "not started"
        lines.append(f"Arm `{found.current.arm.name}` ({found.current.arm.label}), seed {found.current.seed}: "
                     f"pretraining {where}")
    if st.message:
        lines.append(f"_{st.message}_")
    if st.state == FAILED and st.error:
        lines.append(f"Error: `{st.error}`")
    lines += [f"⚠ {problem}" for problem in found.problems]
    return "  \n".join(lines)


def table_markdown(job: ExperimentJob, found: Progress) -> str:
    """Ours beside the paper's with the scale and the verdicts, over the arm-seeds measured so far."""
    if not found.results:
        return NO_TABLE
    partial = (f"_Partial: {len(found.results)} of {found.total} arm-seeds measured; the verdicts judge those._\n\n"
               if len(found.results) < found.total else "")
    return partial + shown.table(job.experiment, job.scale, found.results)


def curves_csv(readers: CurveReaders, root: Path, job: ExperimentJob) -> str:
    """Every logged MLM loss (training and held-out) of every pretraining run: arm (the first arm using it, when
    several share it), seed, kind, step, loss."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["arm", "seed", "kind", "step", "mlm_loss"])
    for one, _ in pretraining_runs(root, job):
        for r in readers.history(one.pretrain_dir).shown():
            value = r.get("mlm_loss" if r.get("kind") == "train" else "eval_mlm_loss")
            if r.get("kind") in ("train", "eval") and isinstance(value, (int, float)):
                writer.writerow([one.arm.name, one.seed, r["kind"], r.get("step"), value])
    return out.getvalue()


def _write(path: Path, text: str) -> str:
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)                      # a browser downloading it never gets half a file
    return str(path)


def export_files(readers: CurveReaders, root: Path, job: ExperimentJob, found: Progress) -> list[str]:
    """The table as CSV and JSON and the curves as CSV, written under ``EXPORT_DIR`` (named after the
    experiment); their paths."""
    EXPORT_DIR.mkdir(parents=True, exist_ok=True)
    name, e = job.experiment.name, job.experiment
    return [_write(EXPORT_DIR / f"{name}-table.csv", shown.as_csv(e, found.results)),
            _write(EXPORT_DIR / f"{name}-table.json", shown.as_json(e, job.scale, found.results)),
            _write(EXPORT_DIR / f"{name}-curves.csv", curves_csv(readers, root, job))]


def live_update(runner: ExperimentRunner, readers: CurveReaders,
                seen: Seen | None) -> tuple[tuple[Any, ...], Seen, bool]:
    """The live view's outputs (status, curves, table, downloads) for a browser last sent ``seen`` (None: send
    everything), ``gr.skip()`` where nothing moved; the new versions; and whether an experiment is going."""
    seen = seen or {}
    st = runner.status()
    skip = gr.skip()
    if st.job is None:
        now: Seen = {"status": ("none",)}
        return ((NO_EXPERIMENT if seen.get("status") != now["status"] else skip, skip, skip, skip),
                {**seen, **now}, False)
    job = st.job
    found = progress(runner.root, job)
    current = found.current
    step = latest_step(readers.history(current.pretrain_dir)) if current is not None else None
    now = {"status": (st.version, None if current is None else (current.index, current.seed), step,
                      len(found.results), found.problems),
           "table": (job.key, tuple((r.arm, r.seed) for r in found.results))}
    curves, now["curves"] = curves_update(readers, runner.root, job, seen.get("curves"))
    outputs = [status_markdown(st, found, step) if seen.get("status") != now["status"] else skip,
               curves if curves is not None else skip]
    if seen.get("table") != now["table"]:
        files = export_files(readers, runner.root, job, found) if found.results else None
        outputs += [table_markdown(job, found), files]
    else:
        outputs += [skip, skip]
    settling = st.ended is not None and time.time() - st.ended < SETTLE_S
    return tuple(outputs), now, st.active or settling
