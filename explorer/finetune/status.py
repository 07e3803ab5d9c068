"""The Fine-tune tab's status line and its table of held-out examples the model gets wrong.

One worker trains one run at a time, pretraining or fine-tuning, whichever tab started it. This tab
words a fine-tuning run as the Training tab does (``explorer.training.status``) plus the task's
numbers, and a pretraining run as what it is: "a pretraining run is running: see the Training tab".
"""
from __future__ import annotations

from typing import Any

from engine.training.tasks.eval_examples import EVAL_EXAMPLES, WRONG_MARK, EvalExamples
from engine.training.tasks.registry import is_finetuning as is_finetuning_task
from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune.tasks import TASKS
from explorer.formatting import percent, sig
from explorer.training.status import status_markdown

WRONG_COLUMNS = ["example", "input", "expected", "predicted", "confidence"]
MAX_CONTEXT_CHARS = 240          # a QA window's context is cut to this many characters in the table


def is_finetuning(st: WorkerStatus) -> bool:
    """Whether the worker's current (or last) run is a fine-tuning run this tab knows."""
    return st.state != RunState.IDLE and st.task in TASKS


def finetune_status(st: WorkerStatus) -> str:
    """Markdown: the state of the worker's run as this tab sees it."""
    if st.state == RunState.IDLE:
        return ("**idle** — no run yet. Pick the base model in the picker at the top, a task and its data, "
                "then press **Start**.")
    if not is_finetuning_task(st.task):
        run = f" (`{st.run_dir.name}`)" if st.run_dir is not None else ""
        if st.active:
            return (f"A **pretraining** run is {st.state}{run}: see the **Training** tab. The app trains one run "
                    "at a time: fine-tuning can start once it has ended (or been stopped there).")
        return (f"The last run was a **pretraining** run{run}, {st.state}: its curves are in the **Training** tab. "
                "Press **Start** to fine-tune.")
    lines = status_markdown(st, in_finetune_tab=True).split("\n\n")
    row = TASKS.get(st.task)
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


def wrong_rows(examples: EvalExamples | None) -> list[list[Any]]:
    """``[example, input, expected, predicted, confidence]`` of each held-out example the model got wrong."""
    if examples is None:
        return []
    rows = []
    for p in examples.wrong:
        text = p.text
        if p.context:
            context = p.context if len(p.context) <= MAX_CONTEXT_CHARS else p.context[:MAX_CONTEXT_CHARS] + "…"
            text = f"{p.text} ‖ {context}"
        rows.append([p.index + 1, text, p.expected, p.predicted, percent(p.confidence)])
    return rows


def wrong_note(st: WorkerStatus, examples: EvalExamples | None) -> str:
    """Markdown above the table: at which step, how many of how many held-out examples are wrong."""
    if not is_finetuning(st):
        return "The held-out examples a fine-tuning run gets wrong appear here after each evaluation."
    if examples is None:
        if st.active:
            return "No evaluation yet: the table fills at the first one."
        return "This run made no held-out predictions (no examples were held out)."
    n, wrong = len(examples.predictions), len(examples.wrong)
    row = TASKS.get(st.task)
    unit = row.unit if row is not None else "examples"
    checked = f"the first {EVAL_EXAMPLES} held-out {unit}" if n == EVAL_EXAMPLES else f"all {n} held-out {unit}"
    if wrong == 0:
        return f"Step {examples.step}: **none wrong**: {checked} are right."
    detail = ""
    if unit == "sentences":
        words = sum(p.words for p in examples.predictions)
        right = sum(p.words_right for p in examples.predictions)
        detail = (f"; a sentence is wrong when one of its words is: {percent(right / max(1, words))} of their "
                  f"{words:,} words are tagged right, wrong tags marked {WRONG_MARK}")
    return (f"Step {examples.step}: **{wrong} of {n}** wrong ({checked} are checked at each evaluation{detail}; "
            "confidence is the model's probability of its own answer).")
