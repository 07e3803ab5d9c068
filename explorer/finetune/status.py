"""The Fine-tune tab's status line.

One worker trains one run at a time, pretraining or fine-tuning, whichever tab started it. This tab
words a fine-tuning run as the Training tab does (``explorer.runs.status``) plus the task's
numbers, and a pretraining run as what it is: "a pretraining run is running: see the Training tab".
A worker with no run since the app started is not the whole story: the runs folder may hold fine-tuning
runs of an earlier start of the app or of the command line, so ``current_status`` then names the newest
one ("finished — `finetune-…`, step 40 / 40") instead of "no run yet".
"""
from __future__ import annotations

from collections.abc import Iterable

from engine.training.runs.run_catalog import RunSummary
from engine.training.tasks.registry import is_finetuning as is_finetuning_task
from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import WorkerStatus
from engine.training.worker.training_worker import TrainingWorker
from explorer.finetune.tasks import finetune_rows
from explorer.formatting import percent, sig
from explorer.runs.status import status_markdown

LOOKING = "_Looking up the latest run…_"     # the page's first value, until the live view's first tick
NO_RUN = ("**idle** — no run yet. Pick the base model in the picker at the top, a task and its data, "
          "then press **Start**.")


def is_finetuning(st: WorkerStatus) -> bool:
    """Whether the worker's current (or last) run is a fine-tuning run this tab knows."""
    return st.state != RunState.IDLE and st.task in finetune_rows()


def steering_state(st: WorkerStatus) -> RunState:
    """The state this tab's Pause, Resume, Stop and Save act on (``explorer.runs.controls.allowed``): the
    worker's for a fine-tuning run; ``idle`` (nothing to steer here) for a pretraining run, which belongs to the
    Training tab."""
    return st.state if is_finetuning_task(st.task) else RunState.IDLE


def newest_finetuning_run(runs: Iterable[RunSummary]) -> RunSummary | None:
    """The first fine-tuning run with a complete checkpoint among ``runs`` (newest first), or None."""
    return next((run for run in runs if is_finetuning_task(run.task) and run.checkpoints > 0), None)


def earlier_run_status(run: RunSummary) -> str:
    """Markdown: a fine-tuning run found in the runs folder (not the worker's): finished, or how far it got."""
    total = f" / {run.total_steps:,}" if run.total_steps else ""
    where = ("It is the newest fine-tuning run in the runs folder (from before the app's latest start, or from "
             "the command line): its checkpoint is in the model picker, its curves in the **Training** tab's "
             "*Run browser*.")
    if run.total_steps is not None and run.step >= run.total_steps:
        head = f"**{RunState.FINISHED}** — `{run.name}`, step {run.step:,}{total} · task **{run.task}**"
        return f"{head}\n\n{where} Press **Start** to fine-tune again."
    head = f"**not finished** — `{run.name}`, step {run.step:,}{total} (its newest checkpoint) · task **{run.task}**"
    return (f"{head}\n\n{where} It was stopped, it failed, or it is still running in another process; the Training "
            "tab's **Continue a run** can finish it. Press **Start** to fine-tune again.")


def current_status(worker: TrainingWorker, st: WorkerStatus | None = None) -> str:
    """Markdown: the worker's run (``st``, default its status now) as this tab sees it; with no run since the app
    started, the newest fine-tuning run in the runs folder (``earlier_run_status``), else "idle — no run yet"."""
    st = st if st is not None else worker.status()
    earlier = newest_finetuning_run(worker.runs()) if st.state == RunState.IDLE else None
    return finetune_status(st, earlier)


def finetune_status(st: WorkerStatus, earlier: RunSummary | None = None) -> str:
    """Markdown: the state of the worker's run as this tab sees it; ``earlier`` (a fine-tuning run found in the
    runs folder) is named while the worker has had no run."""
    if st.state == RunState.IDLE:
        return earlier_run_status(earlier) if earlier is not None else NO_RUN
    if not is_finetuning_task(st.task):
        run = f" (`{st.run_dir.name}`)" if st.run_dir is not None else ""
        if st.active:
            return (f"A **pretraining** run is {st.state}{run}: see the **Training** tab. The app trains one run "
                    "at a time: fine-tuning can start once it has ended (or been stopped there).")
        return (f"The last run was a **pretraining** run{run}, {st.state}: its curves are in the **Training** tab. "
                "Press **Start** to fine-tune.")
    lines = status_markdown(st, in_finetune_tab=True).split("\n\n")
    row = finetune_rows().get(st.task)
    facts = [f"task **{st.task}**"]
    m, e = st.metrics or {}, st.eval_metrics or {}
    if m.get("loss") is not None:
        facts.append(f"loss {sig(m['loss'])}")
    if row is not None:
        if e.get(row.eval_loss) is not None:
            facts.append(f"held-out loss {sig(e[row.eval_loss])}")
        for key, name in row.metrics[:1]:
            if e.get(f"eval_{key}") is not None:
                facts.append(f"held-out {name} {percent(e[f'eval_{key}'])} (step {e.get('step', '?')})")
        if e.get("eval_null_threshold") is not None:      # SQuAD v2.0: answerable and unanswerable apart
            parts = [f"on {what} questions {percent(e[key])}" for key, what in
                     (("eval_has_ans_f1", "answerable"), ("eval_no_ans_f1", "unanswerable")) if key in e]
            facts.append(f"F1 {', '.join(parts)} (\"no answer\" above null odds {sig(e['eval_null_threshold'])}, "
                         "picked on the held-out questions)")
    lines.insert(1, " · ".join(facts))
    return "\n\n".join(lines)
